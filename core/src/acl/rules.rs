//! `plain_acl.yml`: the white lists and accounts of RocketMQ 4.9's plain ACL, parsed and
//! checked entry by entry.

use std::collections::HashMap;

use yaml_rust2::{Yaml, YamlLoader};

use super::addr::AddrPattern;
use crate::config::Secret;

/// `Permission.DENY`.
pub(crate) const DENY: u8 = 1;
/// `Permission.ANY`.
pub(crate) const ANY: u8 = 1 << 1;
/// `Permission.PUB`.
pub(crate) const PUB: u8 = 1 << 2;
/// `Permission.SUB`.
pub(crate) const SUB: u8 = 1 << 3;

/// `Permission.checkPermission`: whether `owned` grants `needed`.
pub(crate) fn check_permission(needed: u8, owned: u8) -> bool {
    if owned & DENY != 0 {
        return false;
    }
    if needed & ANY != 0 {
        return owned & (PUB | SUB) != 0;
    }
    needed & owned != 0
}

/// `Permission.parsePermFromString`, refusing what RocketMQ silently reads as DENY.
fn parse_perm(s: &str) -> Option<u8> {
    match s.trim() {
        "PUB" => Some(PUB),
        "SUB" => Some(SUB),
        "PUB|SUB" | "SUB|PUB" => Some(PUB | SUB),
        "DENY" => Some(DENY),
        _ => None,
    }
}

/// One account (`accounts` entry). `Debug` does not show the secret key.
#[derive(Debug, Clone)]
pub(crate) struct Account {
    pub(crate) access_key: String,
    pub(crate) secret_key: Secret,
    pub(crate) white: AddrPattern,
    pub(crate) admin: bool,
    pub(crate) default_topic_perm: u8,
    pub(crate) default_group_perm: u8,
    /// Topics by name, groups as their retry topic (`%RETRY%group`), as RocketMQ keys them.
    pub(crate) perms: HashMap<String, u8>,
}

/// The whole file.
#[derive(Debug, Clone, Default)]
pub(crate) struct AclRules {
    pub(crate) global_white: Vec<AddrPattern>,
    pub(crate) accounts: HashMap<String, Account>,
    /// The file's `dataVersion` (its first entry's `counter` and `timestamp`, as 4.9 reads
    /// it); (0, 0) when it has none.
    pub(crate) data_version: (i64, i64),
    /// The file as GET_BROKER_CLUSTER_ACL_CONFIG answers it: 4.9's
    /// `GetBrokerClusterAclConfigResponseBody` (`globalWhiteAddrs`, `plainAccessConfigs`),
    /// with no `secretKey` (see `listing`).
    pub(crate) listing: serde_json::Value,
}

/// `AclConstants.ACCESS_KEY_MIN_LENGTH` / `SECRET_KEY_MIN_LENGTH`: keys must be longer.
const KEY_MIN_LENGTH: usize = 6;

impl AclRules {
    /// Parses the text of a `plain_acl.yml`.
    pub(crate) fn parse(text: &str) -> Result<AclRules, String> {
        let docs = YamlLoader::load_from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
        let mut rules = AclRules::default();
        let Some(doc) = docs.into_iter().next() else {
            tracing::warn!("the ACL file is empty: every request from outside a white list is refused");
            rules.listing = listing(&Default::default());
            return Ok(rules);
        };
        let top = match &doc {
            Yaml::Hash(h) => h,
            Yaml::Null => {
                rules.listing = listing(&Default::default());
                return Ok(rules);
            }
            _ => return Err("expected a mapping with globalWhiteRemoteAddresses and accounts".into()),
        };
        for (key, value) in top {
            match key.as_str() {
                Some("globalWhiteRemoteAddresses") => {
                    for (i, item) in list(value, "globalWhiteRemoteAddresses")?.iter().enumerate() {
                        let s = scalar(item).ok_or_else(|| {
                            format!("globalWhiteRemoteAddresses[{i}]: expected an address pattern")
                        })?;
                        let p = AddrPattern::parse(&s)
                            .map_err(|e| format!("globalWhiteRemoteAddresses[{i}]: {e}"))?;
                        rules.global_white.push(p);
                    }
                }
                Some("accounts") => {
                    for (i, item) in list(value, "accounts")?.iter().enumerate() {
                        let account = parse_account(item).map_err(|(who, e)| match who {
                            Some(ak) => format!("accounts[{i}] (accessKey {ak}): {e}"),
                            None => format!("accounts[{i}]: {e}"),
                        })?;
                        if rules.accounts.contains_key(&account.access_key) {
                            return Err(format!(
                                "accounts[{i}] (accessKey {}): this accessKey is defined twice",
                                account.access_key
                            ));
                        }
                        rules.accounts.insert(account.access_key.clone(), account);
                    }
                }
                Some("dataVersion") => {
                    let first = match value {
                        Yaml::Array(a) => a.first(),
                        other => Some(other),
                    };
                    let field = |k: &str| match first.map(|f| &f[k]) {
                        Some(Yaml::Integer(i)) => *i,
                        _ => 0,
                    };
                    rules.data_version = (field("counter"), field("timestamp"));
                }
                Some(other) => tracing::warn!("ACL file: unknown key {other}; ignored"),
                None => return Err("a top-level key is not a string".into()),
            }
        }
        rules.listing = listing(top);
        Ok(rules)
    }
}

/// Whether `text` holds no YAML document, or an empty one (blank, comments only): what a
/// file being rewritten in place (truncated, then written) reads as midway.
pub(crate) fn is_empty_document(text: &str) -> bool {
    YamlLoader::load_from_str(text).is_ok_and(|docs| docs.first().is_none_or(|d| matches!(d, Yaml::Null)))
}

/// [`AclRules::listing`] of a file that parsed: of each account the seven fields of 4.9's
/// `PlainAccessConfig` other than `secretKey`, inserted in fastjson's (alphabetical) order,
/// `admin` always (a Java `boolean`), absent ones left out; keys rmqha does not read are not
/// listed.
fn listing(top: &yaml_rust2::yaml::Hash) -> serde_json::Value {
    use serde_json::{Map, Value};
    let strings = |v: &Yaml| -> Value {
        match v {
            Yaml::Array(items) => items.iter().filter_map(scalar).map(Value::String).collect(),
            _ => Value::Array(Vec::new()),
        }
    };
    let field = |name: &str| top.get(&Yaml::String(name.to_string()));
    let white = field("globalWhiteRemoteAddresses").map_or(Value::Array(Vec::new()), strings);
    let accounts: Vec<Value> = match field("accounts") {
        Some(Yaml::Array(items)) => items
            .iter()
            .filter_map(|item| match item {
                Yaml::Hash(h) => Some(h),
                _ => None,
            })
            .map(|h| {
                let get = |k: &str| h.get(&Yaml::String(k.to_string()));
                let mut out = Map::new();
                for k in [
                    "accessKey",
                    "admin",
                    "defaultGroupPerm",
                    "defaultTopicPerm",
                    "groupPerms",
                    "topicPerms",
                    "whiteRemoteAddress",
                ] {
                    let value = match (k, get(k)) {
                        ("admin", v) => Some(Value::Bool(
                            v.and_then(scalar).is_some_and(|s| s.trim().eq_ignore_ascii_case("true")),
                        )),
                        ("groupPerms" | "topicPerms", Some(v @ Yaml::Array(_))) => Some(strings(v)),
                        ("groupPerms" | "topicPerms", _) => None,
                        (_, v) => v.and_then(scalar).map(|s| Value::String(s.trim().to_string())),
                    };
                    if let Some(value) = value {
                        out.insert(k.to_string(), value);
                    }
                }
                Value::Object(out)
            })
            .collect(),
        _ => Vec::new(),
    };
    serde_json::json!({ "globalWhiteAddrs": white, "plainAccessConfigs": accounts })
}

/// A sequence (or nothing, for an empty or null value).
fn list<'a>(value: &'a Yaml, what: &str) -> Result<&'a [Yaml], String> {
    match value {
        Yaml::Array(a) => Ok(a),
        Yaml::Null => Ok(&[]),
        _ => Err(format!("{what}: expected a list")),
    }
}

/// A scalar as the string Java would read.
pub(crate) fn scalar(value: &Yaml) -> Option<String> {
    match value {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

type AccountError = (Option<String>, String);

fn parse_account(item: &Yaml) -> Result<Account, AccountError> {
    let Yaml::Hash(h) = item else {
        return Err((None, "expected a mapping with accessKey, secretKey, ...".into()));
    };
    let get = |k: &str| h.get(&Yaml::String(k.to_string()));
    let access_key = get("accessKey").and_then(scalar).unwrap_or_default().trim().to_string();
    if access_key.chars().count() <= KEY_MIN_LENGTH {
        return Err((
            None,
            format!(
                "accessKey {access_key:?} is missing or too short (RocketMQ needs more than {KEY_MIN_LENGTH} characters)"
            ),
        ));
    }
    let who = Some(access_key.clone());
    let err = |e: String| (who.clone(), e);
    let secret = get("secretKey").and_then(scalar).unwrap_or_default().trim().to_string();
    let secret_len = secret.chars().count();
    if secret_len <= KEY_MIN_LENGTH {
        // The length, never the key.
        return Err(err(format!(
            "secretKey is missing or too short ({secret_len} characters; RocketMQ needs more than {KEY_MIN_LENGTH})"
        )));
    }
    let white = match get("whiteRemoteAddress") {
        None | Some(Yaml::Null) => AddrPattern::Never,
        Some(v) => {
            let s = scalar(v).ok_or_else(|| err("whiteRemoteAddress: expected an address pattern".into()))?;
            AddrPattern::parse(&s).map_err(|e| err(format!("whiteRemoteAddress: {e}")))?
        }
    };
    let admin = match get("admin") {
        None | Some(Yaml::Null) => false,
        Some(Yaml::Boolean(b)) => *b,
        Some(Yaml::String(s)) if s.trim().eq_ignore_ascii_case("true") => true,
        Some(Yaml::String(s)) if s.trim().eq_ignore_ascii_case("false") => false,
        Some(_) => return Err(err("admin: expected true or false".into())),
    };
    let perm = |key: &str| -> Result<u8, AccountError> {
        match get(key) {
            // `parsePermFromString(null)`: DENY.
            None | Some(Yaml::Null) => Ok(DENY),
            Some(v) => scalar(v)
                .as_deref()
                .and_then(parse_perm)
                .ok_or_else(|| err(format!("{key}: expected PUB, SUB, PUB|SUB or DENY"))),
        }
    };
    let default_topic_perm = perm("defaultTopicPerm")?;
    let default_group_perm = perm("defaultGroupPerm")?;
    let mut perms = HashMap::new();
    for (key, group) in [("topicPerms", false), ("groupPerms", true)] {
        let items = match get(key) {
            None => &[][..],
            Some(v) => list(v, key).map_err(err)?,
        };
        for (j, entry) in items.iter().enumerate() {
            let s = scalar(entry).ok_or_else(|| err(format!("{key}[{j}]: expected name=PERM")))?;
            let parts: Vec<&str> = s.split('=').filter(|p| !p.is_empty()).collect();
            let [name, p] = parts[..] else {
                return Err(err(format!("{key}[{j}] {s:?}: expected name=PERM")));
            };
            let p = parse_perm(p).ok_or_else(|| {
                err(format!("{key}[{j}] {s:?}: expected PUB, SUB, PUB|SUB or DENY after '='"))
            })?;
            let name = name.trim();
            let resource = if group {
                format!("{}{name}", crate::processor::RETRY_GROUP_TOPIC_PREFIX)
            } else {
                name.to_string()
            };
            perms.insert(resource, p);
        }
    }
    Ok(Account {
        access_key,
        secret_key: Secret::new(secret),
        white,
        admin,
        default_topic_perm,
        default_group_perm,
        perms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"#;

    #[test]
    fn distribution_sample_parses() {
        let r = AclRules::parse(SAMPLE).unwrap();
        assert_eq!(r.global_white.len(), 2);
        let a = &r.accounts["RocketMQ"];
        assert_eq!(a.secret_key.expose(), "12345678");
        assert_eq!(a.default_topic_perm, DENY);
        assert_eq!(a.default_group_perm, SUB);
        assert_eq!(a.perms["topicB"], PUB | SUB);
        assert_eq!(a.perms["%RETRY%groupA"], DENY);
        assert_eq!(a.white, AddrPattern::Never);
        assert!(r.accounts["rocketmq2"].admin);
    }

    #[test]
    fn bad_entries_name_the_entry_and_never_the_secret() {
        let bad = SAMPLE.replace("topicB=PUB|SUB", "topicB=PUBSUB");
        let e = AclRules::parse(&bad).unwrap_err();
        assert!(e.contains("accounts[0] (accessKey RocketMQ): topicPerms[1]"), "{e}");
        let bad = SAMPLE.replace(
            "secretKey: 12345678\n    whiteRemoteAddress: 192",
            "secretKey: s3cr\n    whiteRemoteAddress: 192",
        );
        let e = AclRules::parse(&bad).unwrap_err();
        assert!(e.contains("accounts[1] (accessKey rocketmq2): secretKey") && !e.contains("s3cr"), "{e}");
        let e = AclRules::parse(&SAMPLE.replace("192.168.1.*", "192.168.1.300")).unwrap_err();
        assert!(e.contains("accounts[1] (accessKey rocketmq2): whiteRemoteAddress"), "{e}");
        let e = AclRules::parse("accounts: [\n").unwrap_err();
        assert!(e.contains("not valid YAML"), "{e}");
        let e = AclRules::parse(&SAMPLE.replace("rocketmq2", "RocketMQ")).unwrap_err();
        assert!(e.contains("defined twice"), "{e}");
        assert!(!format!("{:?}", AclRules::parse(SAMPLE).unwrap()).contains("12345678"));
    }

    #[test]
    fn permission_bits() {
        assert!(check_permission(PUB, PUB | SUB));
        assert!(!check_permission(PUB, SUB));
        assert!(!check_permission(SUB, DENY | SUB));
        assert!(check_permission(ANY, SUB));
    }
}
