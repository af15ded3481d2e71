//! Runs the C tests in `tests/c/` and the example in `examples/c/` against the library this
//! `cargo test` just built: compiled with `cc -std=c11 -Wall -Wextra -Werror` against
//! `include/rmqha.h`, linked with the fresh `librmqha.so` (or `.a`) from `target/<profile>/deps/`,
//! never the copy a past `cargo build` left in `target/<profile>/`.
//!
//! Environment: `CC` picks the compiler (default `cc`). The valgrind test needs valgrind
//! (`apt-get install valgrind`); `RMQHA_SKIP_VALGRIND=1` skips it where valgrind is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where cargo put the library it built for this test run: next to the test binary.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps directory").to_path_buf();
    assert!(
        deps.join("librmqha.so").is_file() && deps.join("librmqha.a").is_file(),
        "no librmqha.so/.a in {}: the ffi crate's cdylib and staticlib should be built with its tests",
        deps.display()
    );
    deps
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

enum Link {
    Shared,
    Static,
}

/// Compiles one C program into `dir`.
fn compile(dir: &Path, source: &Path, link: Link) -> PathBuf {
    let name = source.file_stem().unwrap().to_str().unwrap();
    let bin = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-O1"])
        .arg("-I")
        .arg(workspace().join("include"))
        .arg("-I")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c"))
        .arg("-o")
        .arg(&bin)
        .arg(source);
    match link {
        Link::Shared => {
            cmd.arg("-L").arg(lib_dir()).arg("-lrmqha");
        }
        // The system libraries Rust's std needs (`--print native-static-libs`).
        Link::Static => {
            cmd.arg(lib_dir().join("librmqha.a")).args([
                "-lgcc_s",
                "-lutil",
                "-lrt",
                "-lpthread",
                "-lm",
                "-ldl",
            ]);
        }
    }
    cmd.arg("-lpthread");
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(
        out.status.success(),
        "{cc} failed on {}:\n{}{}",
        source.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// Runs a program (through `wrapper`, e.g. valgrind, if given) with the fresh library on the
/// loader path and its temporary directories under `dir`; fails the test on a non-zero exit or
/// after `timeout`, showing the program's output.
fn run(dir: &Path, wrapper: &[&str], bin: &Path, args: &[&str], timeout: Duration) -> String {
    let (out_path, err_path) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
    let mut cmd = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    let started = Instant::now();
    let mut child = cmd
        .args(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("TMPDIR", dir)
        .stdin(Stdio::null())
        // Files, not pipes: a chatty child cannot block on a full pipe while we wait.
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let what = format!("{} {}", wrapper.join(" "), bin.display());
    match status {
        Some(s) if s.success() => {
            eprintln!("{what}: ok in {:.1} s", started.elapsed().as_secs_f64());
            stdout
        }
        Some(s) => panic!("{what} failed ({s}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}"),
        None => {
            panic!("{what} did not finish within {timeout:?}:\n--- stdout\n{stdout}\n--- stderr\n{stderr}")
        }
    }
}

fn c_test(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c").join(name)
}

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("rmqha-c-tests-").tempdir().unwrap()
}

/// Master + slave in one program: sync puts PUT_OK, slave catches up, reads on the slave.
#[test]
fn c_master_slave() {
    let dir = scratch();
    let bin = compile(dir.path(), &c_test("master_slave.c"), Link::Shared);
    run(dir.path(), &[], &bin, &[], Duration::from_secs(60));
}

/// Master here, slave in a child process killed with SIGKILL after the puts: every PUT_OK
/// message is in the slave's store when a third process reopens it.
#[test]
fn c_two_processes() {
    let dir = scratch();
    let bin = compile(dir.path(), &c_test("two_process.c"), Link::Shared);
    run(dir.path(), &[], &bin, &["200"], Duration::from_secs(60));
}

/// Error paths: NULL and invalid arguments, bad config keys and values, wrong roles.
#[test]
fn c_errors() {
    let dir = scratch();
    let bin = compile(dir.path(), &c_test("errors.c"), Link::Shared);
    run(dir.path(), &[], &bin, &[], Duration::from_secs(30));
}

/// pthreads putting concurrently through one handle of a SYNC_MASTER with a slave; linked
/// against the static library, so `librmqha.a` is proven too.
#[test]
fn c_threads_static() {
    let dir = scratch();
    let bin = compile(dir.path(), &c_test("threads.c"), Link::Static);
    let out = run(dir.path(), &[], &bin, &["4", "150"], Duration::from_secs(60));
    assert!(out.contains("all PUT_OK"), "{out}");
}

/// What the library logs goes to the program's stderr (warnings by default), and
/// `RMQHA_LOG=off` silences it.
#[test]
fn c_logging() {
    let warning = "haMasterAddress=127.0.0.1:1 is ignored";
    let dir = scratch();
    let bin = compile(dir.path(), &c_test("logging.c"), Link::Shared);
    let out =
        run(dir.path(), &["env", "-u", "RMQHA_LOG", "-u", "RUST_LOG"], &bin, &[], Duration::from_secs(30));
    let stderr = std::fs::read_to_string(dir.path().join("stderr.txt")).unwrap();
    assert!(out.contains("done"), "{out}");
    let line = stderr.lines().find(|l| l.contains(warning)).unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("WARN"), "{line}");
    run(dir.path(), &["env", "RMQHA_LOG=off"], &bin, &[], Duration::from_secs(30));
    let stderr = std::fs::read_to_string(dir.path().join("stderr.txt")).unwrap();
    assert!(!stderr.contains(warning), "{stderr}");
}

/// The example in `examples/c/` builds and runs.
#[test]
fn c_example() {
    let dir = scratch();
    let bin = compile(dir.path(), &workspace().join("examples/c/master_slave.c"), Link::Shared);
    let out = run(dir.path(), &[], &bin, &[], Duration::from_secs(30));
    assert!(out.contains("slave read: FOUND, 5 messages"), "{out}");
}

/// The master/slave program (few puts) and the error paths under valgrind: no invalid access,
/// no leak (definitely, indirectly or possibly lost; `valgrind.supp` names the one block of
/// Rust's std it excuses).
#[test]
fn c_valgrind() {
    if std::env::var_os("RMQHA_SKIP_VALGRIND").is_some() {
        eprintln!("RMQHA_SKIP_VALGRIND is set: skipping the valgrind run");
        return;
    }
    let found = Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(found, "valgrind is not installed (apt-get install valgrind), or set RMQHA_SKIP_VALGRIND=1");
    let supp = format!("--suppressions={}", c_test("valgrind.supp").display());
    let valgrind = [
        "valgrind",
        "--error-exitcode=1",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite,indirect,possible",
        &supp,
    ];
    for (source, args) in [("master_slave.c", &["10"][..]), ("errors.c", &[][..])] {
        let dir = scratch();
        let bin = compile(dir.path(), &c_test(source), Link::Shared);
        run(dir.path(), &valgrind, &bin, args, Duration::from_secs(120));
    }
}

/// `scripts/install-c.sh` (behind `make install-c`) installs the library, the header and a
/// pkg-config file that a C program elsewhere builds with; the program runs against the
/// installed library alone. With `DESTDIR` the files land under it while the `.pc` file names
/// the final paths, as packagers need.
#[test]
fn c_installed_with_pkg_config() {
    let dir = scratch();
    let prefix = dir.path().join("prefix");
    let script = workspace().join("scripts/install-c.sh");
    let install = |destdir: Option<&Path>| {
        let mut cmd = Command::new(&script);
        cmd.arg(lib_dir()).env("PREFIX", &prefix).env_remove("LIBDIR").env_remove("INCLUDEDIR");
        match destdir {
            Some(d) => cmd.env("DESTDIR", d),
            None => cmd.env_remove("DESTDIR"),
        };
        let out = cmd.output().expect("run install-c.sh");
        assert!(out.status.success(), "install-c.sh failed:\n{}", String::from_utf8_lossy(&out.stderr));
    };
    install(None);
    let (lib, inc) = (prefix.join("lib"), prefix.join("include"));
    assert_eq!(
        std::fs::read(lib.join("librmqha.so")).unwrap(),
        std::fs::read(lib_dir().join("librmqha.so")).unwrap()
    );
    assert_eq!(
        std::fs::read(lib.join("librmqha.a")).unwrap(),
        std::fs::read(lib_dir().join("librmqha.a")).unwrap()
    );
    assert_eq!(
        std::fs::read(inc.join("rmqha.h")).unwrap(),
        std::fs::read(workspace().join("include/rmqha.h")).unwrap()
    );

    let pkg_config = |args: &[&str]| {
        let out = Command::new("pkg-config")
            .args(args)
            .arg("rmqha")
            .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
            .env_remove("PKG_CONFIG_LIBDIR")
            .output()
            .expect("pkg-config is not installed (apt-get install pkg-config)");
        assert!(out.status.success(), "pkg-config {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    assert_eq!(pkg_config(&["--modversion"]), env!("CARGO_PKG_VERSION"));
    let cflags = pkg_config(&["--cflags"]);
    let libs = pkg_config(&["--libs"]);
    assert_eq!(cflags, format!("-I{}", inc.display()));
    assert_eq!(libs, format!("-L{} -lrmqha", lib.display()));
    assert!(pkg_config(&["--static", "--libs"]).ends_with("-lpthread -lm -ldl"));

    // The example, built as a user elsewhere would and run against the installed library.
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let bin = dir.path().join("example");
    let out = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .arg(workspace().join("examples/c/master_slave.c"))
        .args(cflags.split_whitespace())
        .args(libs.split_whitespace())
        .arg("-o")
        .arg(&bin)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(out.status.success(), "{cc} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let loader_path = format!("LD_LIBRARY_PATH={}", lib.display());
    let out = run(dir.path(), &["env", &loader_path], &bin, &[], Duration::from_secs(30));
    assert!(out.contains("slave read: FOUND, 5 messages"), "{out}");

    // Staged: files under DESTDIR, paths in the .pc file without it.
    let stage = dir.path().join("stage");
    install(Some(&stage));
    let staged = stage.join(prefix.strip_prefix("/").unwrap());
    assert!(staged.join("lib/librmqha.so").is_file() && staged.join("include/rmqha.h").is_file());
    let pc = std::fs::read_to_string(staged.join("lib/pkgconfig/rmqha.pc")).unwrap();
    assert!(pc.contains(&format!("prefix={}\n", prefix.display())), "{pc}");
    assert!(!pc.contains(stage.to_str().unwrap()), "{pc}");

    // Nothing built: the script names what is missing and installs nothing.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = Command::new(&script).arg(&empty).env("PREFIX", dir.path().join("other")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no librmqha.so in"), "{stderr}");
    assert!(!dir.path().join("other").exists());
}
