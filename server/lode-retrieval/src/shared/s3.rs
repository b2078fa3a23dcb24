//! S3 (and S3-compatible stores: MinIO, R2, a loopback test server) for LanceDB, through
//! `object_store`'s own client, registered in the session's object-store registry.
//!
//! LanceDB's `aws` feature would bring the AWS SDK and OpenDAL (about 80 crates, one of them
//! a C library built with cmake) into every build; `object_store`'s client is enough to read and
//! write a dataset. Credentials come from the usual places, in this order: the `[shared]
//! options` of the config (never secrets: endpoint, region, `allow_http`), the environment
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
//! `AWS_ENDPOINT_URL`, web identity and container credentials), then the profile files
//! (`~/.aws/credentials` and `~/.aws/config`, profile `AWS_PROFILE` or `default`), then the
//! instance metadata service.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lance_core::error::{Error, Result};
use lance_io::object_store::{ObjectStore, ObjectStoreParams, ObjectStoreProvider};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::{ClientOptions, RetryConfig};
use url::Url;

/// How long one request may take, and how long retries of a failing one may go on: a bucket
/// that does not answer fails a question's shared leg within seconds, not minutes.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const RETRY_FOR: Duration = Duration::from_secs(6);

#[derive(Debug, Default)]
pub struct S3Provider;

#[async_trait::async_trait]
impl ObjectStoreProvider for S3Provider {
    async fn new_store(&self, base_path: Url, params: &ObjectStoreParams) -> Result<ObjectStore> {
        // reqwest is built without a default TLS provider: ring is the one the rest of lode uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let options = params.storage_options().cloned().unwrap_or_default();
        let mut root = base_path.clone();
        root.set_path("");
        let builder = builder(&root, &options, &Profile::load())?;
        let store = builder.build().map_err(|e| Error::invalid_input(format!("S3 store for {base_path}: {e}")))?;
        Ok(ObjectStore::new(Arc::new(store), base_path, None, None, false, true, 16, 3, Some(&options)))
    }
}

/// The `AmazonS3Builder` for the bucket of `url`: environment first, then the options, then a
/// profile's values for what neither set.
pub fn builder(url: &Url, options: &HashMap<String, String>, profile: &Profile) -> Result<AmazonS3Builder> {
    let mut b = AmazonS3Builder::from_env().with_url(url.as_str());
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    // object_store reads AWS_ENDPOINT; the AWS SDKs read AWS_ENDPOINT_URL(_S3).
    if let Some(e) = env("AWS_ENDPOINT_URL_S3").or_else(|| env("AWS_ENDPOINT_URL")) {
        b = b.with_endpoint(e);
    }
    let mut client = ClientOptions::new().with_connect_timeout(CONNECT_TIMEOUT).with_timeout(REQUEST_TIMEOUT);
    refuse_secrets(options).map_err(Error::invalid_input)?;
    for (k, v) in options {
        let key = k.to_ascii_lowercase();
        match key.as_str() {
            "allow_http" | "aws_allow_http" => {
                client = client.with_allow_http(matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
            }
            _ => {
                // Options for other layers (timeouts, block sizes) are not S3's.
                if let Ok(cfg) = key.parse::<AmazonS3ConfigKey>() {
                    b = b.with_config(cfg, v)
                }
            }
        }
    }
    if env("AWS_ALLOW_HTTP").is_some_and(|v| v == "true" || v == "1") {
        client = client.with_allow_http(true);
    }
    let has = |k: AmazonS3ConfigKey, b: &AmazonS3Builder| b.get_config_value(&k).is_some_and(|v| !v.is_empty());
    if !has(AmazonS3ConfigKey::AccessKeyId, &b) && !has(AmazonS3ConfigKey::WebIdentityTokenFile, &b) {
        if let (Some(id), Some(secret)) = (profile.get("aws_access_key_id"), profile.get("aws_secret_access_key")) {
            b = b.with_access_key_id(id).with_secret_access_key(secret);
            if let Some(t) = profile.get("aws_session_token") {
                b = b.with_token(t);
            }
        }
    }
    if !has(AmazonS3ConfigKey::Region, &b) {
        b = b.with_region(profile.get("region").unwrap_or("us-east-1"));
    }
    if !has(AmazonS3ConfigKey::Endpoint, &b) {
        if let Some(e) = profile.get("endpoint_url") {
            b = b.with_endpoint(e);
        }
    }
    let retry = RetryConfig { max_retries: 2, retry_timeout: RETRY_FOR, ..Default::default() };
    Ok(b.with_client_options(client).with_retry(retry))
}

/// Secrets never come from a config file (it may be committed, shown, synced): an option
/// whose name says it holds one is refused by that name.
pub(crate) fn refuse_secrets(options: &HashMap<String, String>) -> std::result::Result<(), String> {
    for k in options.keys() {
        let key = k.to_ascii_lowercase();
        if ["secret", "token", "password", "account_key", "sas_key"].iter().any(|s| key.contains(s)) {
            return Err(format!("[shared] options must not hold {k}: credentials come from the environment or ~/.aws/credentials"));
        }
    }
    Ok(())
}

/// The named profile's keys from `~/.aws/credentials` and `~/.aws/config` (the files the AWS
/// CLI writes; `AWS_SHARED_CREDENTIALS_FILE` and `AWS_CONFIG_FILE` move them).
#[derive(Debug, Default, Clone)]
pub struct Profile {
    values: HashMap<String, String>,
}

impl Profile {
    pub fn load() -> Profile {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let env_path = |k: &str, rel: &str| std::env::var_os(k).map(PathBuf::from).or_else(|| home.as_ref().map(|h| h.join(rel)));
        let name = std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "default".into());
        let creds =
            env_path("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials").and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
        let config = env_path("AWS_CONFIG_FILE", ".aws/config").and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
        Profile::parse(&name, &creds, &config)
    }

    /// `credentials` names sections `[name]`; `config` names them `[profile name]`, except
    /// `[default]`. Credentials win over config for the same key.
    pub fn parse(name: &str, credentials: &str, config: &str) -> Profile {
        let mut values = HashMap::new();
        let config_section = if name == "default" { "default".to_owned() } else { format!("profile {name}") };
        for (text, section) in [(config, config_section.as_str()), (credentials, name)] {
            let mut inside = false;
            for line in text.lines() {
                let line = line.trim();
                if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
                    continue;
                }
                if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                    inside = s.trim() == section;
                    continue;
                }
                if inside {
                    if let Some((k, v)) = line.split_once('=') {
                        values.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
                    }
                }
            }
        }
        Profile { values }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_read_like_the_aws_cli_reads_them() {
        let creds = "[default]\naws_access_key_id = AKD\naws_secret_access_key=SD\n\n[team]\n# comment\naws_access_key_id = AKT\naws_secret_access_key = ST\naws_session_token = TT\n";
        let config = "[default]\nregion = eu-west-1\n[profile team]\nregion = us-west-2\nendpoint_url = http://127.0.0.1:9\naws_access_key_id = from-config\n[team]\nregion = ignored\n";
        let d = Profile::parse("default", creds, config);
        assert_eq!((d.get("aws_access_key_id"), d.get("region"), d.get("endpoint_url")), (Some("AKD"), Some("eu-west-1"), None));
        let t = Profile::parse("team", creds, config);
        assert_eq!(t.get("aws_access_key_id"), Some("AKT"), "the credentials file wins over the config file");
        assert_eq!(
            (t.get("region"), t.get("endpoint_url"), t.get("aws_session_token")),
            (Some("us-west-2"), Some("http://127.0.0.1:9"), Some("TT"))
        );
        assert_eq!(Profile::parse("absent", creds, config).get("region"), None);
    }

    /// A set written blind (from the rules in `Profile::parse`'s documentation only) by a helper
    /// that saw neither this parser nor the cases above: scope, order, encoding, structure,
    /// malformed and huge files.
    #[test]
    fn blind_profile_cases() {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/shared/profile-cases.json");
        let cases: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert!(cases.len() >= 40);
        let mut failed = Vec::new();
        for c in &cases {
            let s = |k: &str| c[k].as_str().unwrap_or_default();
            let p = Profile::parse(s("profile"), s("credentials"), s("config"));
            for (k, v) in c["expect"].as_object().unwrap() {
                if p.get(k) != v.as_str() {
                    failed.push(format!("{} ({}): {k} = {:?}, expected {v}", s("name"), s("class"), p.get(k)));
                }
            }
            for k in c["absent"].as_array().unwrap() {
                if let Some(v) = p.get(k.as_str().unwrap()) {
                    failed.push(format!("{} ({}): {k} should be absent, is {v:?}", s("name"), s("class")));
                }
            }
        }
        assert!(failed.is_empty(), "{} of {} cases:\n{}", failed.len(), cases.len(), failed.join("\n"));
    }

    #[test]
    fn secrets_in_the_config_are_refused() {
        let url = Url::parse("s3://bucket").unwrap();
        for k in ["aws_secret_access_key", "AWS_SESSION_TOKEN", "token"] {
            let opts = HashMap::from([(k.to_owned(), "x".to_owned())]);
            let e = builder(&url, &opts, &Profile::default()).expect_err("refused").to_string();
            assert!(e.contains("must not hold"), "{e}");
        }
        let opts = HashMap::from([("endpoint".to_owned(), "http://127.0.0.1:1".to_owned()), ("allow_http".to_owned(), "true".to_owned())]);
        let b = builder(&url, &opts, &Profile::default()).expect("accepted");
        assert_eq!(b.get_config_value(&AmazonS3ConfigKey::Endpoint).as_deref(), Some("http://127.0.0.1:1"));
    }
}
