//! The committed `include/rmqha.h` is exactly what cbindgen 0.29.4 generates from the sources.
//! `RMQHA_BLESS=1 cargo test -p rmqha-ffi --test header` rewrites it.

use std::path::Path;

/// The version macros, from the package version (cbindgen cannot export a string constant, and
/// one source of truth is better anyway: a version bump makes the header stale).
fn version_macros() -> String {
    format!(
        "\n// The version of this header (semantic versioning). rmqha_version() gives the version\n\
         // of the library actually loaded; compare them to detect a mismatch.\n\
         #define RMQHA_VERSION_MAJOR {}\n\
         #define RMQHA_VERSION_MINOR {}\n\
         #define RMQHA_VERSION_PATCH {}\n\
         #define RMQHA_VERSION_STRING \"{}\"",
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_PATCH"),
        env!("CARGO_PKG_VERSION"),
    )
}

#[test]
fn committed_header_is_current() {
    let ffi = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(ffi.join("cbindgen.toml")).expect("ffi/cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_after_include(version_macros())
        .with_src(ffi.join("src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let path = ffi.join("../include/rmqha.h");
    if std::env::var_os("RMQHA_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write include/rmqha.h");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    if committed != fresh {
        let old = String::from_utf8_lossy(&committed);
        let new = String::from_utf8_lossy(&fresh);
        let first = old
            .lines()
            .zip(new.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(old.lines().count().min(new.lines().count()));
        panic!(
            "include/rmqha.h is stale (first difference at line {}):\n  committed: {:?}\n  generated: {:?}\n\
             Regenerate it with: RMQHA_BLESS=1 cargo test -p rmqha-ffi --test header",
            first + 1,
            old.lines().nth(first).unwrap_or("<end of file>"),
            new.lines().nth(first).unwrap_or("<end of file>"),
        );
    }
}
