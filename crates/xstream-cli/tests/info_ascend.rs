//! `xstream info --backend ascend` on the ACL simulator (a test double, not an NPU) with an
//! `ASCEND_HOME_PATH` holding a `runtime` package `version.info`: the device line shows the
//! SoC and cores, the ACL API version, the CANN package version read through
//! `aclsysGetVersionStr` / `aclsysGetVersionNum`, and the run mode; other backends are not
//! listed.

use std::process::Command;

#[test]
fn info_shows_the_runtime_package_version() {
    let home = std::env::temp_dir().join(format!("xstream-cli-info-{}", std::process::id()));
    let dir = home.join("share/info/runtime");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("version.info"), "Version=9.1.0\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xstream"))
        .args(["info", "--backend", "ascend"])
        .envs(xstream_conformance::simulator::env(1))
        .env("ASCEND_HOME_PATH", &home)
        .output()
        .expect("run xstream info");
    let _ = std::fs::remove_dir_all(&home);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "[ascend] available",
        "Ascend NPU 0: Ascend910B1, 24 AI cores, 48 vector cores",
        "ACL runtime 1.17.0, CANN runtime package 9.1.0 (90100000), host run mode from ",
    ] {
        assert!(stdout.contains(want), "missing `{want}` in:\n{stdout}");
    }
    assert!(!stdout.contains("[host]"), "{stdout}");
}

#[test]
fn info_refuses_an_unknown_backend() {
    let out = Command::new(env!("CARGO_BIN_EXE_xstream"))
        .args(["info", "--backend", "opencl"])
        .output()
        .expect("run xstream info");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown backend"));
}
