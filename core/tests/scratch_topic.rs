mod common;
use common::{message, store_config};
use rmqha_core::MessageStore;
#[test]
fn weird_topics() {
    let d = tempfile::tempdir().unwrap();
    let s = MessageStore::open(store_config(&d.path().join("store"), &[])).unwrap();
    s.start().unwrap();
    for t in ["../escape", "a/b", ".", "..", "sp ace", "t\u{0}x", "ok_topic-1%|"] {
        let r = s.put_message_sync(&message(t, 0, 1, 10));
        eprintln!("{t:?}: {:?}", r.as_ref().map(|r| r.status));
    }
    s.wait_dispatched(std::time::Duration::from_secs(5));
    for e in walk(d.path()) {
        eprintln!("  {e}");
    }
}
fn walk(p: &std::path::Path) -> Vec<String> {
    let mut v = vec![];
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let path = e.path();
        if path.is_dir() {
            v.push(path.display().to_string());
            v.extend(walk(&path));
        }
    }
    v
}
