//! Tenant-scoped credentials: token vending with session tags (docs/guarantees.md "Tenant
//! isolation in three layers", layer 3; infra/README-deploy.md "Tenant isolation: what IAM
//! enforces, and what the code enforces"; template.yaml `TenantAccessRole`).
//!
//! With `TENANT_ROLE_ARN` set, every tenant data call - DynamoDB items of one tenant, S3 objects
//! under one tenant's prefix - is signed with credentials of that role assumed for the tenant the
//! request acts for ([`memory_core::acting_tenant`]: the verified JWT claim, the direct invoke's or
//! the queued pass's `tenantId`), with the session tag `tenant=<id>`. The role's policy admits only
//! keys that lead with that tag, so a key of another tenant that a bug builds is refused by
//! DynamoDB and S3 themselves. The cross-tenant fan-out Queries, EventBridge and SQS stay on the
//! function's own role.
//!
//! Per tenant one session is kept ([`TenantSessions`]): SDK clients built once over the vended
//! credentials, so a hit costs a map lookup and two `Arc` clones. A miss, an expiring session
//! (refreshed [`REFRESH_BEFORE`] ahead) or an evicted one (least recently used beyond the cache
//! size) costs one `sts:AssumeRole`; concurrent requests for the same tenant wait for that one call
//! (single flight). A failed AssumeRole is `StoreError::Unavailable` (retryable: 503 / 429 with
//! `Retry-After`, or a queued pass back on its queue), held for [`FAILURE_HOLD`] so a burst does
//! not hammer a failing STS; a data call is never sent on the function's role instead, and a data
//! call with no acting tenant is refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_config::SdkConfig;
use aws_sdk_dynamodb::config::Credentials;
use memory_core::acting_tenant;
use memory_core::StoreError;
use memory_guard::TenantId;

/// A session is replaced this long before it expires (sessions last an hour).
pub const REFRESH_BEFORE: Duration = Duration::from_secs(300);
/// An expiring session whose refresh failed is still used while it has this much left.
const STILL_USABLE: Duration = Duration::from_secs(30);
/// How long a failed AssumeRole answers for its tenant before STS is asked again.
pub const FAILURE_HOLD: Duration = Duration::from_secs(1);
/// Tenants kept when `TENANT_SESSION_CACHE` is not set.
pub const DEFAULT_CAPACITY: usize = 1000;
/// The session tag the role's policy reads (`${aws:PrincipalTag/tenant}`).
pub const TENANT_TAG: &str = "tenant";

/// Vends credentials for one tenant (STS in production, a stand-in in tests).
#[async_trait]
pub trait Vendor: Send + Sync {
    async fn assume(&self, tenant: &TenantId) -> Result<Credentials, StoreError>;
}

/// `sts:AssumeRole` on `TENANT_ROLE_ARN` with the session tag `tenant`, on the function's role.
pub struct StsVendor {
    client: aws_sdk_sts::Client,
    role_arn: String,
}

impl StsVendor {
    pub fn new(client: aws_sdk_sts::Client, role_arn: String) -> Self {
        StsVendor { client, role_arn }
    }
}

/// `RoleSessionName` (2-64 of `[\w+=,.@-]`): the tenant id, so CloudTrail names the tenant.
fn session_name(tenant: &TenantId) -> String {
    let mut name = format!("wm-{}", tenant.as_str());
    name.truncate(64);
    name
}

#[async_trait]
impl Vendor for StsVendor {
    async fn assume(&self, tenant: &TenantId) -> Result<Credentials, StoreError> {
        const OP: &str = "assume_role";
        let unavailable = |code: String| StoreError::Unavailable { op: OP, code };
        let tag = aws_sdk_sts::types::Tag::builder()
            .key(TENANT_TAG)
            .value(tenant.as_str())
            .build()
            .map_err(|_| unavailable("BuildRequest".into()))?;
        let name = session_name(tenant);
        // Every failure is retryable for the caller: throttling and 5xx clear by themselves, a
        // misconfigured role once an operator fixes it; the request or pass is then retried.
        let out = crate::retry::send(OP, || {
            self.client
                .assume_role()
                .role_arn(&self.role_arn)
                .role_session_name(&name)
                .tags(tag.clone())
                .send()
        })
        .await
        .map_err(|e| unavailable(crate::error::code_of(&e)))?;
        let vended = out
            .credentials()
            .ok_or_else(|| unavailable("NoCredentials".into()))?;
        let expires = SystemTime::try_from(*vended.expiration())
            .map_err(|_| unavailable("BadExpiration".into()))?;
        Ok(Credentials::new(
            vended.access_key_id(),
            vended.secret_access_key(),
            Some(vended.session_token().to_owned()),
            Some(expires),
            "wop-memory-tenant",
        ))
    }
}

/// The SDK clients of one tenant's session.
pub struct TenantSession {
    expires: SystemTime,
    pub dynamo: aws_sdk_dynamodb::Client,
    #[cfg(feature = "archive")]
    pub s3: aws_sdk_s3::Client,
}

impl TenantSession {
    fn fresh_at(&self, now: SystemTime, margin: Duration) -> bool {
        self.expires > now + margin
    }
}

/// Builds a session's clients like the function's own (`config.rs`): same endpoint, region, HTTP
/// client and timeouts, SDK retries off, S3 path-style on emulators; only the credentials differ.
#[derive(Clone)]
struct ClientFactory {
    sdk: SdkConfig,
    #[cfg_attr(not(feature = "archive"), allow(dead_code))]
    path_style: bool,
}

impl ClientFactory {
    fn build(&self, credentials: Credentials) -> TenantSession {
        let expires = credentials
            .expiry()
            .unwrap_or_else(|| SystemTime::now() + REFRESH_BEFORE + STILL_USABLE);
        TenantSession {
            expires,
            dynamo: aws_sdk_dynamodb::Client::from_conf(
                aws_sdk_dynamodb::config::Builder::from(&self.sdk)
                    .credentials_provider(credentials.clone())
                    .retry_config(RetryConfig::disabled())
                    .build(),
            ),
            #[cfg(feature = "archive")]
            s3: aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(&self.sdk)
                    .credentials_provider(credentials)
                    .force_path_style(self.path_style)
                    .retry_config(RetryConfig::disabled())
                    .build(),
            ),
        }
    }
}

/// One tenant's place in the cache; its async lock makes the AssumeRole single-flight.
#[derive(Default)]
struct Slot {
    state: tokio::sync::Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    session: Option<Arc<TenantSession>>,
    failed: Option<(Instant, StoreError)>,
}

#[derive(Default)]
struct Slots {
    map: HashMap<String, (Arc<Slot>, u64)>,
    tick: u64,
}

/// The per-tenant session cache (module docs).
pub struct TenantSessions {
    vendor: Arc<dyn Vendor>,
    factory: ClientFactory,
    capacity: usize,
    slots: Mutex<Slots>,
}

impl TenantSessions {
    /// `sdk` is the function's configuration (its role signs the AssumeRole calls);
    /// `path_style`: S3 on an emulator.
    pub fn new(
        vendor: Arc<dyn Vendor>,
        sdk: &SdkConfig,
        path_style: bool,
        capacity: usize,
    ) -> Self {
        TenantSessions {
            vendor,
            factory: ClientFactory {
                sdk: sdk.clone(),
                path_style,
            },
            capacity: capacity.max(1),
            slots: Mutex::new(Slots::default()),
        }
    }

    /// The session of the tenant the current request acts for. No acting tenant is a bug in the
    /// edge; the call is refused rather than sent on the function's role.
    pub async fn current(&self, op: &'static str) -> Result<Arc<TenantSession>, StoreError> {
        match acting_tenant::current() {
            Some(tenant) => self.session(&tenant).await,
            None => {
                tracing::error!(op, "tenant data call outside a tenant scope refused");
                Err(StoreError::Backend {
                    op,
                    code: "NoActingTenant".into(),
                })
            }
        }
    }

    /// `tenant`'s session: cached, or assumed now (once, however many callers wait for it).
    pub async fn session(&self, tenant: &TenantId) -> Result<Arc<TenantSession>, StoreError> {
        let slot = self.slot(tenant.as_str());
        let mut state = slot.state.lock().await;
        let now = SystemTime::now();
        if let Some(session) = state
            .session
            .as_ref()
            .filter(|s| s.fresh_at(now, REFRESH_BEFORE))
        {
            return Ok(session.clone());
        }
        let failure = state
            .failed
            .as_ref()
            .filter(|(at, _)| at.elapsed() < FAILURE_HOLD)
            .map(|(_, e)| e.clone());
        let outcome = match failure {
            Some(e) => Err(e),
            None => self.vendor.assume(tenant).await,
        };
        match outcome {
            Ok(credentials) => {
                let session = Arc::new(self.factory.build(credentials));
                tracing::info!(
                    tenant = %tenant.as_str(),
                    expires_in_s = session
                        .expires
                        .duration_since(now)
                        .map(|d| d.as_secs())
                        .unwrap_or(0),
                    "tenant session assumed"
                );
                state.session = Some(session.clone());
                state.failed = None;
                Ok(session)
            }
            Err(e) => {
                if state.failed.is_none() {
                    tracing::warn!(tenant = %tenant.as_str(), error = %e, "tenant session not vended");
                    state.failed = Some((Instant::now(), e.clone()));
                }
                // A refresh that failed early leaves the old session usable until near expiry.
                match state
                    .session
                    .as_ref()
                    .filter(|s| s.fresh_at(now, STILL_USABLE))
                {
                    Some(session) => Ok(session.clone()),
                    None => Err(e),
                }
            }
        }
    }

    /// The tenant's slot, created on first use; the least recently used slot goes when the
    /// cache is full (a request still holding its session keeps it until it finishes).
    fn slot(&self, tenant: &str) -> Arc<Slot> {
        let mut slots = match self.slots.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        slots.tick += 1;
        let tick = slots.tick;
        if let Some((slot, used)) = slots.map.get_mut(tenant) {
            *used = tick;
            return slot.clone();
        }
        if slots.map.len() >= self.capacity {
            let oldest = slots
                .map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                slots.map.remove(&oldest);
            }
        }
        let slot = Arc::new(Slot::default());
        slots.map.insert(tenant.to_owned(), (slot.clone(), tick));
        slot
    }

    /// Tenants cached now (tests, figures).
    pub fn cached(&self) -> usize {
        self.slots.lock().map(|s| s.map.len()).unwrap_or(0)
    }
}

/// The DynamoDB client a data call uses: the acting tenant's session's when tenant-scoped
/// credentials are on, the function's own otherwise (exactly today's client).
#[derive(Clone)]
pub struct DynamoClients {
    own: aws_sdk_dynamodb::Client,
    tenants: Option<Arc<TenantSessions>>,
}

impl DynamoClients {
    pub fn new(own: aws_sdk_dynamodb::Client, tenants: Option<Arc<TenantSessions>>) -> Self {
        DynamoClients { own, tenants }
    }

    /// For calls on one tenant's keys.
    pub async fn data(&self, op: &'static str) -> Result<aws_sdk_dynamodb::Client, StoreError> {
        match &self.tenants {
            None => Ok(self.own.clone()),
            Some(tenants) => Ok(tenants.current(op).await?.dynamo.clone()),
        }
    }

    /// The table `name` for calls on one tenant's keys, through [`Self::data`].
    pub async fn table<'a>(
        &self,
        name: &'a str,
        op: &'static str,
    ) -> Result<crate::dynamo::Table<'a>, StoreError> {
        Ok(crate::dynamo::Table::new(self.data(op).await?, name, op))
    }

    /// The function's own role: only for the cross-tenant fan-out Queries (`byDirtyRef`,
    /// `byDue`), which no tenant's credentials may make.
    pub fn fan_out(&self) -> &aws_sdk_dynamodb::Client {
        &self.own
    }
}

impl std::fmt::Debug for DynamoClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoClients")
            .field("tenant_scoped", &self.tenants.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts AssumeRole calls; slow, so concurrent callers overlap; fails when told to.
    #[derive(Default)]
    struct Counting {
        calls: AtomicUsize,
        fail: std::sync::atomic::AtomicBool,
        lifetime_s: u64,
    }

    impl Counting {
        /// The AssumeRole calls made so far.
        fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }
    }

    #[async_trait]
    impl Vendor for Counting {
        async fn assume(&self, tenant: &TenantId) -> Result<Credentials, StoreError> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(30)).await;
            if self.fail.load(Ordering::SeqCst) {
                return Err(StoreError::Unavailable {
                    op: "assume_role",
                    code: "Throttling".into(),
                });
            }
            let lifetime = Duration::from_secs(if self.lifetime_s == 0 {
                3600
            } else {
                self.lifetime_s
            });
            Ok(Credentials::new(
                format!("ASIA{}{n}", tenant.as_str()),
                "secret",
                Some("token".into()),
                Some(SystemTime::now() + lifetime),
                "test",
            ))
        }
    }

    fn sdk() -> SdkConfig {
        SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .build()
    }

    /// A cache of `capacity` sessions over `vendor`, and the vendor to count its calls.
    fn sessions(vendor: Counting, capacity: usize) -> (Arc<Counting>, Arc<TenantSessions>) {
        let vendor = Arc::new(vendor);
        let cache = TenantSessions::new(vendor.clone(), &sdk(), true, capacity);
        (vendor, Arc::new(cache))
    }

    fn tenant(t: &str) -> TenantId {
        TenantId::parse(t).unwrap_or_else(|_| panic!("{t} is a tenant id"))
    }

    /// Asks the cache for tenant `t`'s session, which must come.
    async fn serve(cache: &TenantSessions, t: &str) {
        assert!(
            cache.session(&tenant(t)).await.is_ok(),
            "no session for {t}"
        );
    }

    #[tokio::test]
    async fn a_burst_for_one_tenant_makes_one_assume_role() {
        let (vendor, cache) = sessions(Counting::default(), 10);
        let mut burst = tokio::task::JoinSet::new();
        for _ in 0..50 {
            let cache = cache.clone();
            burst.spawn(async move { cache.session(&tenant("acme")).await.is_ok() });
        }
        while let Some(ok) = burst.join_next().await {
            assert_eq!(ok.ok(), Some(true));
        }
        assert_eq!(vendor.calls(), 1);
        // Later requests hit the cache; another tenant is its own call.
        serve(&cache, "acme").await;
        serve(&cache, "other").await;
        assert_eq!(vendor.calls(), 2);
    }

    #[tokio::test]
    async fn the_cache_is_bounded_least_recently_used_first() {
        let (vendor, cache) = sessions(Counting::default(), 2);
        for t in ["a", "b", "a", "c"] {
            serve(&cache, t).await;
        }
        assert_eq!(cache.cached(), 2);
        assert_eq!(vendor.calls(), 3);
        // "b" was the least recently used: it went, "a" stayed.
        serve(&cache, "a").await;
        assert_eq!(vendor.calls(), 3);
        serve(&cache, "b").await;
        assert_eq!(vendor.calls(), 4);
    }

    #[tokio::test]
    async fn a_session_is_refreshed_before_it_expires() {
        // Sessions of 200 s are inside the 300 s refresh margin: every request refreshes.
        let lasting_200s = Counting {
            lifetime_s: 200,
            ..Counting::default()
        };
        let (vendor, cache) = sessions(lasting_200s, 10);
        serve(&cache, "acme").await;
        serve(&cache, "acme").await;
        assert_eq!(vendor.calls(), 2);
    }

    #[tokio::test]
    async fn a_failed_assume_is_retryable_held_briefly_and_never_the_own_role() {
        let (vendor, cache) = sessions(Counting::default(), 10);
        vendor.fail.store(true, Ordering::SeqCst);
        let own = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&sdk()).build(),
        );
        let clients = DynamoClients::new(own, Some(cache.clone()));
        let got = acting_tenant::acting_for(Some("acme"), clients.data("get")).await;
        assert!(
            matches!(&got, Err(StoreError::Unavailable { op: "assume_role", code }) if code == "Throttling"),
            "{:?}",
            got.err()
        );
        // Within the hold the failure answers without another STS call.
        let again = acting_tenant::acting_for(Some("acme"), clients.data("get")).await;
        assert!(again.is_err());
        assert_eq!(vendor.calls(), 1);
        tokio::time::sleep(FAILURE_HOLD).await;
        vendor.fail.store(false, Ordering::SeqCst);
        let healed = acting_tenant::acting_for(Some("acme"), clients.data("get")).await;
        assert!(healed.is_ok());
        assert_eq!(vendor.calls(), 2);
    }

    #[tokio::test]
    async fn a_data_call_outside_a_tenant_scope_is_refused_when_on_and_own_when_off() {
        let (vendor, cache) = sessions(Counting::default(), 10);
        let own = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&sdk()).build(),
        );
        let on = DynamoClients::new(own.clone(), Some(cache));
        let refused = on.data("get").await;
        assert!(
            matches!(&refused, Err(StoreError::Backend { code, .. }) if code == "NoActingTenant")
        );
        assert_eq!(vendor.calls(), 0);
        let off = DynamoClients::new(own, None);
        assert!(off.data("get").await.is_ok());
    }

    #[test]
    fn session_names_fit_sts() {
        let long = "x".repeat(128);
        assert_eq!(session_name(&tenant(&long)).len(), 64);
        assert_eq!(session_name(&tenant("acme")), "wm-acme");
    }
}
