//! Configuration from the environment (docs/operating.md "Configuration"): `MEMORY_TABLE`,
//! `ARCHIVE_BUCKET`, `EVENT_BUS_NAME`, optionally `EMBEDDING_MODEL_ID` / `EMBEDDING_DIMENSIONS` (semantic search)
//! and `ABSTRACTIVE_MODEL_ID` (abstractive dreams), `TENANT_ROLE_ARN` / `TENANT_SESSION_CACHE`
//! (tenant-scoped credentials, `tenant.rs`), plus the standard AWS variables. When `AWS_ENDPOINT_URL` points at an
//! emulator (LocalStack or compatible), S3 switches to path-style addressing, which emulators on
//! one host:port need.

use std::sync::Arc;

use aws_config::retry::RetryConfig;
use aws_config::BehaviorVersion;

use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};

use crate::tenant::{StsVendor, TenantSessions};
use crate::DynamoEntryStore;
#[cfg(feature = "events")]
use crate::EventBridgePublisher;
#[cfg(feature = "archive")]
use crate::S3ArchiveStore;
#[cfg(feature = "queue")]
use crate::SqsPassQueue;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub table: String,
    pub bucket: String,
    pub bus: String,
    pub endpoint_override: bool,
    pub pass_queue_url: Option<String>,
    /// `EMBED_QUEUE_URL`: where a writer queues the embed pass of a ref it left entries without
    /// a vector in (memory-dream's pass queue; docs/search.md "Semantic search").
    pub embed_queue_url: Option<String>,
    /// The Bedrock embedding model; `None` (unset or empty): no embeddings, text search only.
    pub embedding_model: Option<String>,
    /// Vector size asked of the model (Titan V2: 256, 512 or 1024; its default when unset).
    pub embedding_dimensions: Option<u32>,
    /// The Bedrock text model of abstractive dreams; `None` (unset or empty, the default): dreams
    /// write the deterministic summary only.
    pub abstractive_model: Option<String>,
    /// `TENANT_ROLE_ARN`: the role assumed per tenant for every tenant data call (`tenant.rs`);
    /// `None` (unset or empty): the function's own role makes them, as before.
    pub tenant_role_arn: Option<String>,
    /// `TENANT_SESSION_CACHE`: most tenants whose sessions a container keeps.
    pub tenant_session_cache: usize,
    /// The default quota limits, from variables named like the quotas (`MaxEntriesPerRef`, ...;
    /// unset, empty or 0: unlimited; docs/quotas.md "Limits").
    pub quota_limits: memory_core::quota::Limits,
}

#[derive(Debug, thiserror::Error)]
pub enum MissingSetting {
    #[error("missing environment variable {0}")]
    Missing(&'static str),
    #[error("environment variable {0} is not {1}")]
    Invalid(&'static str, &'static str),
}

impl Settings {
    pub fn from_env() -> Result<Self, MissingSetting> {
        let var = |name: &'static str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or(MissingSetting::Missing(name))
        };
        let optional = |name: &'static str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let embedding_dimensions = match optional("EMBEDDING_DIMENSIONS") {
            None => None,
            Some(raw) => Some(raw.parse::<u32>().ok().filter(|d| *d > 0).ok_or(
                MissingSetting::Invalid("EMBEDDING_DIMENSIONS", "a positive integer"),
            )?),
        };
        let tenant_session_cache = match optional("TENANT_SESSION_CACHE") {
            None => crate::tenant::DEFAULT_CAPACITY,
            Some(raw) => {
                raw.parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or(MissingSetting::Invalid(
                        "TENANT_SESSION_CACHE",
                        "a positive integer",
                    ))?
            }
        };
        Ok(Settings {
            table: var("MEMORY_TABLE")?,
            bucket: var("ARCHIVE_BUCKET")?,
            bus: var("EVENT_BUS_NAME")?,
            endpoint_override: std::env::var("AWS_ENDPOINT_URL").is_ok_and(|v| !v.is_empty()),
            pass_queue_url: optional("PASS_QUEUE_URL"),
            embed_queue_url: optional("EMBED_QUEUE_URL"),
            embedding_model: optional("EMBEDDING_MODEL_ID"),
            embedding_dimensions,
            abstractive_model: optional("ABSTRACTIVE_MODEL_ID"),
            tenant_role_arn: optional("TENANT_ROLE_ARN"),
            tenant_session_cache,
            quota_limits: memory_core::quota::Limits::from_lookup(|name| std::env::var(name).ok())
                .map_err(|e| MissingSetting::Invalid(e.0, "a whole number (0 = unlimited)"))?,
        })
    }
}

/// The adapters, built once per Lambda container and shared across invocations.
#[derive(Clone)]
pub struct AwsPorts {
    /// The DynamoDB client and table, for adapters of other crates over the same table
    /// (`commitment-aws`).
    pub dynamo: aws_sdk_dynamodb::Client,
    pub table: String,
    /// `EMBEDDING_MODEL_ID`: whose vectors the entries carry (consolidation compares only
    /// those), also where no embedder is built.
    pub embedding_model: Option<String>,
    pub entries: Arc<DynamoEntryStore>,
    /// Metered usage: hour and day items, the per-day tenant lists, the quota counters.
    pub usage: Arc<crate::usage::DynamoUsageStore>,
    /// Per-tenant sessions when `TENANT_ROLE_ARN` is set, for adapters of other crates over the
    /// same table (`commitment-aws`); `None`: everything runs on the function's role.
    pub tenant_sessions: Option<Arc<TenantSessions>>,
    #[cfg(feature = "archive")]
    pub archives: Arc<S3ArchiveStore>,
    #[cfg(feature = "events")]
    pub events: Arc<EventBridgePublisher>,
    /// The function's own pass queue (`PASS_QUEUE_URL`), for the scheduled passes.
    #[cfg(feature = "queue")]
    pub queue: Option<Arc<SqsPassQueue>>,
    /// Where embed passes are queued (`EMBED_QUEUE_URL`), for writers.
    #[cfg(feature = "queue")]
    pub embed_queue: Option<Arc<SqsPassQueue>>,
    /// The embedder (Bedrock), when `EMBEDDING_MODEL_ID` is set.
    #[cfg(feature = "embeddings")]
    pub embedder: Option<Arc<dyn memory_core::ports::Embedder>>,
    /// The abstractive model of abstractive dreams (Bedrock Converse), when `ABSTRACTIVE_MODEL_ID`
    /// is set.
    #[cfg(feature = "abstractive")]
    pub abstractive_model: Option<Arc<dyn memory_core::ports::AbstractiveModel>>,
    /// Secrets Manager, where the exchange door's signing seed lives.
    #[cfg(feature = "signing-key")]
    pub secrets: aws_sdk_secretsmanager::Client,
    /// `EMBEDDING_DIMENSIONS`, when set: what the exchange manifest states.
    pub embedding_dimensions: Option<u32>,
}

impl AwsPorts {
    pub async fn from_env() -> Result<Self, MissingSetting> {
        let settings = Settings::from_env()?;
        let sdk = aws_config::defaults(BehaviorVersion::latest())
            .http_client(https_client())
            .load()
            .await;
        let ports = Self::from_sdk_config(&sdk, &settings);
        // The function's composition root: where the edge writes each invocation's usage
        // (docs/metering.md "The items and the rollup").
        memory_core::metering::install_sink(ports.usage.clone());
        Ok(ports)
    }

    /// The ports every service writes through, on the system clock.
    #[cfg(feature = "events")]
    pub fn core(&self) -> memory_core::ports::CorePorts {
        memory_core::ports::CorePorts::new(
            self.entries.clone(),
            self.events.clone(),
            Arc::new(memory_core::ports::SystemClock),
        )
    }

    /// The OpenIntent door's store over this table, on the tenant's session when there is one.
    #[cfg(feature = "keyed")]
    pub fn keyed_store(&self) -> crate::keyed::DynamoKeyedStore {
        crate::keyed::DynamoKeyedStore::new(self.dynamo.clone(), self.table.clone())
            .with_tenant_sessions(self.tenant_sessions.clone())
    }

    /// The exchange door's grant store over this table, on the tenant's session when there is
    /// one.
    #[cfg(feature = "exchange")]
    pub fn exchange_store(&self) -> crate::exchange::DynamoExchangeStore {
        crate::exchange::DynamoExchangeStore::new(self.dynamo.clone(), self.table.clone())
            .with_tenant_sessions(self.tenant_sessions.clone())
    }

    /// The SDK's own retries are off: `retry.rs` is the one retry policy (classification,
    /// backoff, the invocation's deadline), and two stacked layers would multiply attempts.
    pub fn from_sdk_config(sdk: &aws_config::SdkConfig, settings: &Settings) -> Self {
        let no_retries = RetryConfig::disabled();
        // One SDK crate's client on `sdk`, its retries off (extra builder calls go first).
        macro_rules! client {
            ($service:ident $(.$setting:ident($value:expr))*) => {
                $service::Client::from_conf(
                    $service::config::Builder::from(sdk)
                        $(.$setting($value))*
                        .retry_config(no_retries.clone())
                        .build(),
                )
            };
        }
        let tenant_sessions = settings.tenant_role_arn.clone().map(|role| {
            let sts = client!(aws_sdk_sts);
            Arc::new(TenantSessions::new(
                Arc::new(StsVendor::new(sts, role)),
                sdk,
                settings.endpoint_override,
                settings.tenant_session_cache,
            ))
        });
        let dynamo = client!(aws_sdk_dynamodb);
        let entries = Arc::new(
            DynamoEntryStore::new(dynamo.clone(), settings.table.clone())
                .with_tenant_sessions(tenant_sessions.clone())
                .with_quota_defaults(settings.quota_limits),
        );
        AwsPorts {
            entries: entries.clone(),
            usage: Arc::new(crate::usage::DynamoUsageStore::new(
                dynamo.clone(),
                settings.table.clone(),
            )),
            dynamo,
            tenant_sessions: tenant_sessions.clone(),
            table: settings.table.clone(),
            embedding_model: settings.embedding_model.clone(),
            #[cfg(feature = "archive")]
            archives: Arc::new(
                S3ArchiveStore::new(
                    client!(aws_sdk_s3.force_path_style(settings.endpoint_override)),
                    settings.bucket.clone(),
                )
                .with_tenant_sessions(tenant_sessions.clone()),
            ),
            #[cfg(feature = "events")]
            events: Arc::new(EventBridgePublisher::new(
                client!(aws_sdk_eventbridge),
                settings.bus.clone(),
            )),
            #[cfg(feature = "queue")]
            queue: settings
                .pass_queue_url
                .clone()
                .map(|url| Arc::new(SqsPassQueue::new(client!(aws_sdk_sqs), url))),
            #[cfg(feature = "queue")]
            embed_queue: settings
                .embed_queue_url
                .clone()
                .map(|url| Arc::new(SqsPassQueue::new(client!(aws_sdk_sqs), url))),
            #[cfg(feature = "embeddings")]
            embedder: metered_model(&entries, &settings.embedding_model, |model| {
                crate::bedrock::BedrockEmbedder::new(
                    client!(aws_sdk_bedrockruntime),
                    model,
                    settings.embedding_dimensions,
                )
            })
            .map(|m| m as Arc<dyn memory_core::ports::Embedder>),
            #[cfg(feature = "signing-key")]
            secrets: client!(aws_sdk_secretsmanager),
            embedding_dimensions: settings.embedding_dimensions,
            #[cfg(feature = "abstractive")]
            abstractive_model: metered_model(&entries, &settings.abstractive_model, |model| {
                crate::bedrock::BedrockAbstractiveModel::new(client!(aws_sdk_bedrockruntime), model)
            })
            .map(|m| m as Arc<dyn memory_core::ports::AbstractiveModel>),
        }
    }
}

/// The Bedrock model `build` makes of the configured model id (`None` without one), under the
/// acting tenant's daily token quota (docs/quotas.md "Bedrock tokens"), so every model call is
/// admitted and charged whichever service makes it.
#[cfg(any(feature = "embeddings", feature = "abstractive"))]
fn metered_model<M>(
    quotas: &Arc<DynamoEntryStore>,
    model_id: &Option<String>,
    build: impl FnOnce(String) -> M,
) -> Option<Arc<memory_core::token_quota::TokenQuota<M>>> {
    let model = build(model_id.clone()?);
    Some(Arc::new(memory_core::token_quota::TokenQuota::new(
        Arc::new(model),
        quotas.clone() as Arc<dyn memory_core::ports::QuotaStore>,
        Arc::new(memory_core::ports::SystemClock),
    )))
}

/// The HTTPS client every SDK client here uses: hyper with rustls over *ring*. The SDK loads the
/// platform's trust roots when a client is built, at start-up (see `lambda_adapter::start` for
/// how they are read only once).
pub fn https_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}
