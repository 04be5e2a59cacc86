//! Builds `tests/c/sysinfo.c` (a vendor-style ACL program written against our own
//! declarations in `tests/c/acl_sysinfo.h`) with the system C compiler, links it against the
//! simulated `libascendcl.so` and runs it for two simulated products, with an
//! `ASCEND_HOME_PATH` tree holding the package `version.info` files it reads.

use std::path::Path;
use std::process::Command;

mod c_build;
use c_build::{build, compiler, lib_dir};

/// An `ASCEND_HOME_PATH` with `share/info/<package>/version.info` files.
fn version_tree(root: &Path) {
    let long = format!("Version=9.{}\n", "1".repeat(130));
    let files: [(&str, &str); 5] = [
        (
            "runtime",
            "package_name=runtime\nVersion=8.5.0\nversion_dir=8.5\n",
        ),
        ("opp-kernel", "Version= 9.0.0-rc.1 \r\n"),
        ("legacy", "Version=8.0.RC3\n"),
        ("long", &long),
        ("noversion", "package_name=noversion\n"),
    ];
    for (pkg, text) in files {
        let dir = root.join("share/info").join(pkg);
        std::fs::create_dir_all(&dir).expect("create the version tree");
        std::fs::write(dir.join("version.info"), text).expect("write version.info");
    }
}

fn run(exe: &Path, lib: &Path, home: &Path, product: &str) -> String {
    let out = Command::new(exe)
        .arg(product)
        .env("LD_LIBRARY_PATH", lib)
        .env("ASCEND_HOME_PATH", home)
        .env("XSIM_PRODUCT", product)
        .env_remove("XSIM_FAULTS")
        .env_remove("XSIM_DEVICES")
        .output()
        .expect("run the program");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "sysinfo ({product}) failed ({:?}):\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn vendor_style_sysinfo_program_runs_on_the_simulator() {
    let Some(cc) = compiler() else {
        println!("SKIP: no C compiler (gcc or $CC) on this machine");
        return;
    };
    let lib = lib_dir();
    assert!(
        lib.join("libascendcl.so").exists(),
        "libascendcl.so not built in {}",
        lib.display()
    );
    let tmp = std::env::temp_dir().join(format!("xsim-c-sysinfo-{}", std::process::id()));
    let home = tmp.join("ascend");
    version_tree(&home);
    let exe = tmp.join("sysinfo");
    build(&cc, &lib, &exe, "sysinfo.c", &[], &["-lm"]);
    let a2 = run(&exe, &lib, &home, "a2");
    let p310 = run(&exe, &lib, &home, "310p");
    let _ = std::fs::remove_dir_all(&tmp);
    for line in [
        "run mode ok",
        "runtime package 8.5.0 (80500000)",
        "versions ok",
        "data types ok",
        "soc Ascend910B1, 48 vector cores",
        "error detail ok",
        "memset ok",
        "SYSINFO OK",
    ] {
        assert!(a2.contains(line), "missing `{line}` in:\n{a2}");
    }
    for line in [
        "soc Ascend310P3, 7 vector cores",
        "error detail ok",
        "SYSINFO OK",
    ] {
        assert!(p310.contains(line), "missing `{line}` in:\n{p310}");
    }
}
