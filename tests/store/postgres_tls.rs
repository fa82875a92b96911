//! TLS to PostgreSQL (README, "Running on PostgreSQL"): on a private cluster that refuses
//! every connection without TLS, `sslmode=require` (or `verify-full`) with `sslrootcert`
//! naming the CA connects and writes; without them the server refuses; with another CA the
//! certificate is refused — each failure one sentence, exit 1, nothing written.

use super::postgres::server;
use crate::support::pg_cluster::{is_root, PrivateCluster};
use std::path::Path;
use std::process::Command;

/// Runs `openssl args…` in `dir`, failing the test when it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`{name}.pem`, `{name}.key`) in `dir`.
fn ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
        ],
    );
}

#[test]
fn tls_to_postgres_is_required_verified_and_refused_in_one_sentence() {
    // The shared server only decides whether PostgreSQL tests run at all.
    if server().is_none() {
        return;
    }
    let cluster = PrivateCluster::start(&[], &[]);
    let url = cluster.create_database("tls_test");
    let certs = tempfile::tempdir().unwrap();
    let dir = certs.path();
    ca(dir, "ca");
    ca(dir, "other-ca");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ],
    );
    // The server's files, its own and private; TLS on, and every connection without it refused.
    for file in ["server.crt", "server.key"] {
        let to = cluster.dir().join(file);
        std::fs::copy(dir.join(file), &to).unwrap();
        if is_root() {
            assert!(Command::new("chown")
                .arg("postgres:")
                .arg(&to)
                .status()
                .unwrap()
                .success());
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let hba = cluster.dir().join("data/pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(&hba, format!("hostnossl all all 0.0.0.0/0 reject\n{rules}")).unwrap();
    let mut admin = cluster.client("postgres");
    for sql in [
        format!(
            "ALTER SYSTEM SET ssl_cert_file = '{}'",
            cluster.dir().join("server.crt").display()
        ),
        format!(
            "ALTER SYSTEM SET ssl_key_file = '{}'",
            cluster.dir().join("server.key").display()
        ),
        "ALTER SYSTEM SET ssl = on".to_string(),
        "SELECT pg_reload_conf()".to_string(),
    ] {
        admin.execute(sql.as_str(), &[]).unwrap();
    }
    drop(admin);
    std::thread::sleep(std::time::Duration::from_millis(500));

    let home = tempfile::tempdir().unwrap();
    let run = |db: &str, args: &[&str]| {
        crate::support::memscope_cmd(home.path())
            .args(["--db", db])
            .args(args)
            .output()
            .unwrap()
    };
    let ca_pem = dir.join("ca.pem");
    let verified = format!("{url}?sslmode=verify-full&sslrootcert={}", ca_pem.display());
    let out = run(&verified, &["init"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let write = [
        "write",
        "--subject",
        "user:42",
        "--predicate",
        "包管理器",
        "--value",
        "pnpm 🚀",
        "--scope",
        "global",
        "--source",
        "tls",
        "--json",
    ];
    let out = run(&verified, &write);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let required = format!("{url}?sslmode=require&sslrootcert={}", ca_pem.display());
    let out = run(&required, &["list", "--json"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("pnpm 🚀"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Without TLS the server refuses; with another CA memscope refuses the certificate; a CA
    // file that is not there is named. One sentence each, exit 1, nothing written.
    let other = format!(
        "{url}?sslmode=require&sslrootcert={}",
        dir.join("other-ca.pem").display()
    );
    let missing = format!(
        "{url}?sslmode=require&sslrootcert={}",
        dir.join("nowhere.pem").display()
    );
    for (db, words) in [
        (url.clone(), vec!["does not let user", "pg_hba.conf"]),
        (other, vec!["TLS connection", "sslrootcert"]),
        (
            missing,
            vec!["cannot read the CA certificates", "nowhere.pem"],
        ),
    ] {
        let out = run(&db, &write);
        assert_eq!(out.status.code(), Some(1), "{db}");
        let said = String::from_utf8_lossy(&out.stderr);
        crate::support::assert_one_sentence(&said, &words);
        assert!(!said.contains(&cluster_password(&url)), "{said}");
    }
    let out = run(
        &verified,
        &[
            "history",
            "--subject",
            "user:42",
            "--predicate",
            "package_manager",
            "--json",
        ],
    );
    let events: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(events.as_array().unwrap().len(), 1, "{events}");
}

/// The password in `postgres://user:password@…`.
fn cluster_password(url: &str) -> String {
    let creds = url.split_once("://").unwrap().1.split_once('@').unwrap().0;
    creds.split_once(':').unwrap().1.to_string()
}
