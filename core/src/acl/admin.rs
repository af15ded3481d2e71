//! The ACL admin requests of RocketMQ 4.9 (`AdminBrokerProcessor`), which change the ACL file
//! over the remoting port: `mqadmin updateAclConfig`, `deleteAclConfig`,
//! `updateGlobalWhiteAddr` and `clusterAclConfigVersion`.
//!
//! - UPDATE_AND_CREATE_ACL_CONFIG (50): header `accessKey`, `secretKey`, `whiteRemoteAddress`,
//!   `admin`, `defaultTopicPerm`, `defaultGroupPerm`, `topicPerms` and `groupPerms` (the lists
//!   `,`-separated). A new account is added; an existing one keeps what the header leaves out,
//!   except `admin`, which is set from the header (absent: false), as 4.9's
//!   `createAclAccessConfigMap` does.
//! - DELETE_ACL_CONFIG (51): header `accessKey`; an account that does not exist is
//!   DELETE_ACL_CONFIG_FAILED (210).
//! - UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): header `globalWhiteAddrs` (`,`-separated) replaces
//!   `globalWhiteRemoteAddresses`.
//! - GET_BROKER_CLUSTER_ACL_INFO (52): answers the file's data version (`version`, and
//!   `allAclFileVersion` keyed by the file's path, as 4.9) with the broker's `clusterName`,
//!   `brokerName` and `brokerAddr` in the response header.
//!
//! Each change is made to the file's YAML document (keys rmqha does not read are kept; comments
//! are not, as in 4.9, whose snakeyaml dump drops them), its `dataVersion` counter raised, and the
//! result checked as a load checks the file: a change that would make the file unusable (a
//! permission that is not PUB, SUB, PUB|SUB or DENY, a key of 6 characters or fewer, an address
//! pattern RocketMQ refuses) is refused with the reason, UPDATE_AND_CREATE_ACL_CONFIG_FAILED
//! (209) or UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED (211), and nothing is written. The file is
//! replaced whole (a temporary file synced, then renamed over it, and the directory synced), so
//! a crash leaves the old version or the new one, and the new rules apply before the answer.
//!
//! - GET_BROKER_CLUSTER_ACL_CONFIG (54, `mqadmin getAccessConfigSubCommand`): the rules in
//!   effect as 4.9's `GetBrokerClusterAclConfigResponseBody` (`globalWhiteAddrs`,
//!   `plainAccessConfigs`), without any account's `secretKey`.
//!
//! Beyond 4.9, where any signed request may change or read the ACL (these codes are not in its
//! `Permission.ADMIN_CODE`): 50, 51, 53 and 54 need an account with `admin: true`, and a secret
//! key is in no answer, remark or log line (4.9's 54 answers every account's secret key to any
//! signed request).

use std::io::Write;
use std::path::Path;

use yaml_rust2::yaml::Hash;
use yaml_rust2::{Yaml, YamlEmitter, YamlLoader};

use super::AclState;
use super::rules::AclRules;
use crate::remoting::{RemotingCommand, request_code, response_code};

/// Java `ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED`.
pub const UPDATE_AND_CREATE_ACL_CONFIG_FAILED: i32 = 209;
/// Java `ResponseCode.DELETE_ACL_CONFIG_FAILED`.
pub const DELETE_ACL_CONFIG_FAILED: i32 = 210;
/// Java `ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED`.
pub const UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED: i32 = 211;

/// The codes the gate answers itself.
pub(crate) const CODES: &[i32] = &[
    request_code::UPDATE_AND_CREATE_ACL_CONFIG,
    request_code::DELETE_ACL_CONFIG,
    request_code::GET_BROKER_CLUSTER_ACL_INFO,
    request_code::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
    request_code::GET_BROKER_CLUSTER_ACL_CONFIG,
];

/// Who this broker is, for GET_BROKER_CLUSTER_ACL_INFO.
#[derive(Debug, Clone, Default)]
pub struct BrokerIdentity {
    pub cluster_name: String,
    pub broker_name: String,
    pub broker_addr: String,
}

fn key(k: &str) -> Yaml {
    Yaml::String(k.to_string())
}

/// `UtilAll.split(s, ",")`, entries trimmed, empty ones dropped.
fn split(s: &str) -> Vec<Yaml> {
    s.split(',').map(str::trim).filter(|p| !p.is_empty()).map(|p| Yaml::String(p.to_string())).collect()
}

/// The answer to one of [`CODES`].
pub(crate) fn handle(state: &AclState, ident: &BrokerIdentity, req: &RemotingCommand) -> RemotingCommand {
    let fail = |code: i32, why: String| RemotingCommand::response_to(req, code, Some(&why));
    // A change's answer: SUCCESS (and a log line saying what changed), or `failed` with why.
    let answer = |result: Result<(), String>, failed: i32, done: String, what: String| match result {
        Ok(()) => {
            tracing::info!("ACL: {done}");
            RemotingCommand::response_to(req, response_code::SUCCESS, None)
        }
        Err(why) => fail(failed, format!("{what}: {why}")),
    };
    match req.code {
        request_code::UPDATE_AND_CREATE_ACL_CONFIG => {
            let Some(ak) = req.ext("accessKey").map(str::trim).filter(|a| !a.is_empty()) else {
                return fail(UPDATE_AND_CREATE_ACL_CONFIG_FAILED, "the accessKey can't be null".into());
            };
            let result = state.edit(|doc| {
                let accounts = accounts_of(doc)?;
                let at = accounts.iter().position(|a| access_key_of(a).as_deref() == Some(ak));
                let mut account = match at {
                    Some(i) => match &accounts[i] {
                        Yaml::Hash(h) => h.clone(),
                        _ => Hash::new(),
                    },
                    None => Hash::new(),
                };
                account.insert(key("accessKey"), Yaml::String(ak.to_string()));
                for field in ["secretKey", "whiteRemoteAddress", "defaultTopicPerm", "defaultGroupPerm"] {
                    if let Some(v) = req.ext(field).map(str::trim) {
                        // An empty value is none (no white address; the default permission DENY).
                        let v = if v.is_empty() { Yaml::Null } else { Yaml::String(v.to_string()) };
                        account.insert(key(field), v);
                    }
                }
                let admin = req.ext("admin").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
                account.insert(key("admin"), Yaml::Boolean(admin));
                for field in ["topicPerms", "groupPerms"] {
                    if let Some(v) = req.ext(field) {
                        account.insert(key(field), Yaml::Array(split(v)));
                    }
                }
                match at {
                    Some(i) => accounts[i] = Yaml::Hash(account),
                    None => accounts.push(Yaml::Hash(account)),
                }
                Ok(())
            });
            answer(
                result,
                UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
                format!("account {ak} created or updated"),
                format!("The accesskey[{ak}] corresponding to accessConfig has been updated failed"),
            )
        }
        request_code::DELETE_ACL_CONFIG => {
            let ak = req.ext("accessKey").map(str::trim).unwrap_or_default();
            let result = state.edit(|doc| {
                let accounts = accounts_of(doc)?;
                let before = accounts.len();
                accounts.retain(|a| access_key_of(a).as_deref() != Some(ak));
                if accounts.len() == before { Err("no such account".to_string()) } else { Ok(()) }
            });
            answer(
                result,
                DELETE_ACL_CONFIG_FAILED,
                format!("account {ak} deleted"),
                format!("The accesskey[{ak}] corresponding to accessConfig has been deleted failed"),
            )
        }
        request_code::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG => {
            let addrs = split(req.ext("globalWhiteAddrs").unwrap_or_default());
            let n = addrs.len();
            let result = state.edit(|doc| {
                doc.insert(key("globalWhiteRemoteAddresses"), Yaml::Array(addrs));
                Ok(())
            });
            answer(
                result,
                UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                format!("global white list replaced by {n} pattern(s)"),
                "The globalWhiteAddresses has been updated failed".to_string(),
            )
        }
        request_code::GET_BROKER_CLUSTER_ACL_INFO => {
            let (counter, timestamp) = state.rules.read().data_version;
            // Java `DataVersion` as fastjson writes it (fields in alphabetical order).
            let version =
                serde_json::json!({ "counter": counter, "stateVersion": 0, "timestamp": timestamp });
            let all = serde_json::json!({ state.path.display().to_string(): &version });
            RemotingCommand::response_to(req, response_code::SUCCESS, None)
                .with_ext("version", version.to_string())
                .with_ext("allAclFileVersion", all.to_string())
                .with_ext("clusterName", &ident.cluster_name)
                .with_ext("brokerName", &ident.broker_name)
                .with_ext("brokerAddr", &ident.broker_addr)
        }
        request_code::GET_BROKER_CLUSTER_ACL_CONFIG => {
            // The rules in effect (a broken version of the file on disk is not among them).
            let body = state.rules.read().listing.to_string();
            RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body)
        }
        _ => RemotingCommand::not_supported(req),
    }
}

/// The `accounts` list of the document (made if absent).
fn accounts_of(doc: &mut Hash) -> Result<&mut Vec<Yaml>, String> {
    let entry = doc.entry(key("accounts")).or_insert(Yaml::Array(Vec::new()));
    if matches!(entry, Yaml::Null) {
        *entry = Yaml::Array(Vec::new());
    }
    match entry {
        Yaml::Array(a) => Ok(a),
        _ => Err("the file's accounts is not a list".into()),
    }
}

/// An account's accessKey as the rules read it.
fn access_key_of(account: &Yaml) -> Option<String> {
    match account {
        Yaml::Hash(h) => super::rules::scalar(h.get(&key("accessKey"))?).map(|s| s.trim().to_string()),
        _ => None,
    }
}

impl AclState {
    /// Applies `change` to the file's document, raises its data version, checks the result
    /// as a load would, writes it in place of the file (crash-safe) and takes the new rules.
    /// Edits are serialized; an error leaves the file and the rules as they were.
    pub(crate) fn edit(&self, change: impl FnOnce(&mut Hash) -> Result<(), String>) -> Result<(), String> {
        let _one_at_a_time = self.edit_lock.lock();
        let text =
            std::fs::read_to_string(&self.path).map_err(|e| format!("cannot read the ACL file: {e}"))?;
        let docs =
            YamlLoader::load_from_str(&text).map_err(|e| format!("the ACL file is not valid YAML: {e}"))?;
        let mut doc = match docs.into_iter().next() {
            None | Some(Yaml::Null) => Hash::new(),
            Some(Yaml::Hash(h)) => h,
            Some(_) => return Err("the ACL file is not a mapping".into()),
        };
        change(&mut doc)?;
        let in_file = match &doc.get(&key("dataVersion")) {
            Some(Yaml::Array(a)) => match a.first().map(|v| &v["counter"]) {
                Some(Yaml::Integer(i)) => *i,
                _ => 0,
            },
            _ => 0,
        };
        let counter = in_file.max(self.rules.read().data_version.0);
        let mut version = Hash::new();
        version.insert(key("counter"), Yaml::Integer(counter + 1));
        version.insert(key("timestamp"), Yaml::Integer(crate::store::clock::now_ms()));
        doc.insert(key("dataVersion"), Yaml::Array(vec![Yaml::Hash(version)]));
        let doc = Yaml::Hash(doc);
        let mut out = String::new();
        YamlEmitter::new(&mut out).dump(&doc).map_err(|e| format!("cannot write YAML: {e}"))?;
        out.push('\n');
        // What is written must read back as the same document: the emitter leaves some
        // strings unquoted that the loader reads as another type (`0o17` as a number), which
        // would change a key or a secret without a word.
        let back = YamlLoader::load_from_str(&out).map_err(|e| format!("cannot write YAML: {e}"))?;
        if back.first() != Some(&doc) {
            return Err("a value would not read back as written (a key or a permission YAML reads as a \
                        number or a boolean, such as 0o17: quote it in the file, or choose another)"
                .into());
        }
        AclRules::parse(&out)?;
        replace_file(&self.path, out.as_bytes()).map_err(|e| format!("cannot write the ACL file: {e}"))?;
        // Taken here, or by the watcher if it read the file first.
        self.reload_if_changed();
        if self.last.lock().as_deref() != Some(out.as_bytes()) {
            return Err(
                "the ACL file was written, but changed again before it was taken (see the log)".into()
            );
        }
        Ok(())
    }
}

/// Writes `bytes` in place of `path`: a temporary file beside it, synced, renamed over it, and
/// the directory synced.
fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // The file a link names (a mounted ConfigMap, say), not the link.
    let path = &std::fs::canonicalize(path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // A name of this process and call: two brokers sharing the file never write one
    // temporary file together.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.rmqha-tmp-{}-{n}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        // The mode of the file it replaces (its owner's only, if that cannot be read): a file
        // of secrets keeps whatever protection its operator gave it.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).map(|m| m.permissions().mode() & 0o777).unwrap_or(0o600);
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Patterns and permissions YAML reads specially (`*` starts an alias, `{` a mapping, `|`
    /// a block scalar) survive a change written back, and so does a key rmqha does not read.
    #[test]
    fn a_change_written_back_keeps_every_entry_as_it_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain_acl.yml");
        let text = "\
# a comment, lost as in 4.9
globalWhiteRemoteAddresses:
  - '*'
  - 192.168.0.{100,101}
  - 10.10.103.*
  - 1050::5:600:300c:1-200
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
    groupPerms:
      - groupA=SUB
    someFutureKey: kept
";
        std::fs::write(&path, text).unwrap();
        let state = AclState::load(&path).unwrap();
        let before = AclRules::parse(text).unwrap();
        state
            .edit(|doc| {
                accounts_of(doc)?.push(Yaml::Hash(
                    [
                        (key("accessKey"), Yaml::String("second00".into())),
                        (key("secretKey"), Yaml::String("true".into())),
                    ]
                    .into_iter()
                    .collect(),
                ));
                Err("not yet".into())
            })
            .unwrap_err();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "a refused change writes nothing");
        state.edit(|_| Ok(())).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        let after = AclRules::parse(&written).unwrap();
        assert_eq!(after.global_white, before.global_white, "{written}");
        let (a, b) = (&after.accounts["RocketMQ"], &before.accounts["RocketMQ"]);
        assert_eq!(a.secret_key.expose(), b.secret_key.expose(), "{written}");
        assert_eq!(
            (a.perms.clone(), a.default_topic_perm, a.white.clone()),
            (b.perms.clone(), b.default_topic_perm, b.white.clone())
        );
        assert!(written.contains("someFutureKey: kept"), "{written}");
        assert_eq!(after.data_version.0, 1, "{written}");
        assert_eq!(state.rules.read().data_version.0, 1, "taken at once");
        // A secret YAML would read back as a number is never changed silently: written
        // quoted, or refused.
        let odd = state.edit(|doc| {
            accounts_of(doc)?.push(Yaml::Hash(
                [
                    (key("accessKey"), Yaml::String("octal-account".into())),
                    (key("secretKey"), Yaml::String("0o12345670".into())),
                ]
                .into_iter()
                .collect(),
            ));
            Ok(())
        });
        match odd {
            Ok(()) => {
                let rules = AclRules::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
                assert_eq!(rules.accounts["octal-account"].secret_key.expose(), "0o12345670");
            }
            Err(e) => assert!(e.contains("would not read back"), "{e}"),
        }
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("plain_acl.yml")], "no temporary file left");
    }
}
