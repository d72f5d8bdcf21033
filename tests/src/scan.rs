//! Whole-store scans for leak checks: every item of the table and every object version of the
//! bucket, as raw text, so a test can assert that a secret's plaintext is stored nowhere.

use aws_config::SdkConfig;
use aws_sdk_s3::error::ProvideErrorMetadata;

/// Every attribute of every item in the table, as debug text.
pub async fn table_text(sdk: &SdkConfig, table: &str) -> String {
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let mut out = String::new();
    let mut start = None;
    loop {
        let page = client
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .unwrap_or_else(|e| panic!("scan: {e:?}"));
        for item in page.items() {
            // Sorted, so two scans of an unchanged item print the same line.
            let sorted: std::collections::BTreeMap<_, _> = item.iter().collect();
            out.push_str(&format!("{sorted:?}\n"));
        }
        match page.last_evaluated_key() {
            Some(k) if !k.is_empty() => start = Some(k.clone()),
            _ => return out,
        }
    }
}

/// The bodies of every object version in the bucket, concatenated.
pub async fn bucket_text(sdk: &SdkConfig, bucket: &str) -> String {
    let config = aws_sdk_s3::config::Builder::from(sdk)
        .force_path_style(true)
        .build();
    let client = aws_sdk_s3::Client::from_conf(config);
    let versions = client
        .list_object_versions()
        .bucket(bucket)
        .send()
        .await
        .unwrap_or_else(|e| panic!("list versions: {e:?}"));
    let mut out = String::new();
    for v in versions.versions() {
        let (Some(key), Some(version)) = (v.key(), v.version_id()) else {
            continue;
        };
        let object = match client
            .get_object()
            .bucket(bucket)
            .key(key)
            .version_id(version)
            .send()
            .await
        {
            Ok(object) => object,
            // Deleted since the listing (a forget of a test running beside this one): that
            // version holds nothing any more.
            Err(e) if matches!(e.code(), Some("NoSuchVersion" | "NoSuchKey")) => continue,
            Err(e) => panic!("get object: {e:?}"),
        };
        let body = object
            .body
            .collect()
            .await
            .unwrap_or_else(|e| panic!("read object: {e:?}"))
            .into_bytes();
        out.push_str(key);
        out.push('\n');
        out.push_str(&String::from_utf8_lossy(&body));
        out.push('\n');
    }
    out
}
