//! The request signature of RocketMQ's `AclClientRPCHook` and `PlainAccessResource.parse`:
//! HMAC-SHA1, keyed by the account's secret key, over the values of the request's ext
//! fields in ascending key order (all but `Signature` and `_UNIQUE_KEY_QUERY`) concatenated
//! as UTF-8, followed by the body; base64 (standard alphabet, padded).

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;

use crate::config::Secret;
use crate::remoting::RemotingCommand;

/// Ext field carrying the access key (`SessionCredentials.ACCESS_KEY`).
pub const ACCESS_KEY: &str = "AccessKey";
/// Ext field carrying the signature (`SessionCredentials.SIGNATURE`).
pub const SIGNATURE: &str = "Signature";
/// Ext field carrying the optional security token (`SessionCredentials.SECURITY_TOKEN`).
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// `MixAll.UNIQUE_MSG_QUERY_FLAG`: left out of the signed content by the broker.
const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";

/// The signature of `request` (ext fields and body) under `secret`, as the broker checks it.
pub(crate) fn signature(request: &RemotingCommand, secret: &str) -> String {
    let mut mac =
        <Hmac<Sha1> as KeyInit>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    // `ext_fields` is a BTreeMap: ascending by key, as Java's TreeMap for ASCII keys.
    for (key, value) in &request.ext_fields {
        if key != SIGNATURE && key != UNIQUE_MSG_QUERY_FLAG {
            mac.update(value.as_bytes());
        }
    }
    mac.update(&request.body);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Compares two byte strings in time that depends on their lengths only, so a client cannot
/// find a valid signature byte by byte from the broker's response times.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// An access key and its secret key: how a client (a slave syncing its master's config)
/// signs its requests, as RocketMQ's `AclClientRPCHook` does. `Debug` hides the secret.
#[derive(Clone, Debug)]
pub struct Credentials {
    access_key: String,
    secret_key: Secret,
}

impl Credentials {
    pub fn new(access_key: impl Into<String>, secret_key: Secret) -> Self {
        Credentials { access_key: access_key.into(), secret_key }
    }

    /// The credentials set by `aclAccessKey` and `aclSecretKey`, if both are.
    pub fn from_config(config: &crate::config::BrokerConfig) -> Option<Self> {
        (!config.acl_access_key.is_empty() && !config.acl_secret_key.is_empty())
            .then(|| Credentials::new(config.acl_access_key.clone(), config.acl_secret_key.clone()))
    }

    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// Adds `AccessKey` and `Signature` to `request` (replacing earlier ones).
    pub fn sign(&self, request: &mut RemotingCommand) {
        request.ext_fields.remove(SIGNATURE);
        request.set_ext(ACCESS_KEY, &self.access_key);
        let sig = signature(request, self.secret_key.expose());
        request.set_ext(SIGNATURE, sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer() {
        // HMAC-SHA1 of "The quick brown fox jumps over the lazy dog" keyed "key" (RFC 2104
        // examples): de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9.
        let mut req = RemotingCommand::request(10).with_ext("a", "The quick brown fox ");
        req.body = b"jumps over the lazy dog".to_vec();
        req.set_ext("b", "");
        req.set_ext(SIGNATURE, "ignored");
        assert_eq!(signature(&req, "key"), "3nybhbi3iqa8ino29wqQcBydtNk=");
    }

    #[test]
    fn compare() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    #[test]
    fn credentials_hide_the_secret() {
        let c = Credentials::new("slave-ak", Secret::new("very-secret-key"));
        assert!(!format!("{c:?}").contains("very-secret-key"));
    }
}
