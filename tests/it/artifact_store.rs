//! Artifacts through the embedded S3 store (`artifacts::embedded`), as the step agent moves
//! them: files and directories put and got back, keys replaced, listed and deleted, and the
//! errors a user sees for a missing key, a missing bucket, a missing path and a wrong secret
//! key. Then the store as `dev` runs it: its endpoint printed, the default repository's
//! ConfigMap and Secret in the cluster, enough to reach it.
//!
//! `throughput_of_a_100_mib_file_against_cp` is `#[ignore]`d: a measurement, run with
//! `cargo test --release --test it artifact_store::throughput -- --ignored --nocapture`.

use crate::support::dev_process::start_dev;
use crate::support::{Namespace, namespace};

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use rstest::rstest;
use workflow_operator::artifacts::embedded::{self, EmbeddedStore};
use workflow_operator::artifacts::{self, Error, S3Target};
use workflow_operator_core::crd::artifacts::ArtifactRepository;

async fn store() -> EmbeddedStore {
    EmbeddedStore::start(None).await.expect("the store starts")
}

/// How a test's puts and gets reach the store: through its directory, as a step on its machine
/// does, or over HTTP only, as from anywhere else.
#[derive(Clone, Copy, Debug)]
enum Route {
    Directory,
    Http,
}

impl Route {
    fn target(self, store: &EmbeddedStore) -> S3Target {
        let target = store.target().clone();
        match self {
            Route::Directory => target,
            Route::Http => S3Target {
                local_directory: None,
                ..target
            },
        }
    }
}

/// `len` bytes that gzip cannot shrink, the same for the same seed.
fn random_file(path: &Path, len: usize, seed: u64) {
    let mut random = StdRng::seed_from_u64(seed);
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut block = vec![0; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(block.len());
        random.fill_bytes(&mut block[..n]);
        file.write_all(&block[..n]).unwrap();
        left -= n;
    }
    file.flush().unwrap();
}

/// The error and each of its causes, as `{:#}` of anyhow shows them.
fn whole(error: &Error) -> String {
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(error) = cause {
        text.push_str(&format!(": {error}"));
        cause = error.source();
    }
    text
}

#[rstest]
#[tokio::test]
async fn a_file_put_is_got_back_at_the_destination_path_even_in_many_parts(
    #[values(Route::Directory, Route::Http)] route: Route,
) {
    let store = store().await;
    let target = route.target(&store);
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("model.bin");
    // Larger than three parts of 8 MiB: a multipart upload with parts in flight together.
    random_file(&source, 30 << 20, 1);

    let stored = artifacts::put_path(&target, "ns/wf/run-1/train/model.tgz", &source)
        .await
        .unwrap();
    assert_eq!(stored.key, "ns/wf/run-1/train/model.tgz");
    let listed = artifacts::list(&target, "ns/wf").await.unwrap();
    assert_eq!(
        listed,
        std::slice::from_ref(&stored),
        "the size put is the size stored"
    );
    assert!(stored.size > 30 << 20, "{stored:?}");

    // Another name than the source's: the file lands at the path, not under its own name.
    let dest = dir.path().join("inputs/deep/weights.bin");
    artifacts::get_path(&target, &stored.key, &dest)
        .await
        .unwrap();
    assert!(
        std::fs::read(&source).unwrap() == std::fs::read(&dest).unwrap(),
        "the file came back changed"
    );
}

#[rstest]
#[tokio::test]
async fn a_directory_put_is_recreated_with_nested_and_empty_subdirectories(
    #[values(Route::Directory, Route::Http)] route: Route,
) {
    let store = store().await;
    let target = route.target(&store);
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("out");
    std::fs::create_dir_all(source.join("reports/2024/q1")).unwrap();
    std::fs::create_dir_all(source.join("cache/empty")).unwrap();
    std::fs::write(source.join("summary.txt"), "3 passed").unwrap();
    std::fs::write(source.join("reports/2024/q1/a.csv"), "x,y\n1,2\n").unwrap();

    let stored = artifacts::put_path(&target, "k/out.tgz", &source)
        .await
        .unwrap();
    let dest = dir.path().join("in/out");
    artifacts::get_path(&target, &stored.key, &dest)
        .await
        .unwrap();

    let read = |path: &str| std::fs::read_to_string(dest.join(path)).unwrap();
    assert_eq!(read("summary.txt"), "3 passed");
    assert_eq!(read("reports/2024/q1/a.csv"), "x,y\n1,2\n");
    assert!(dest.join("cache/empty").is_dir(), "the empty directory");
    assert_eq!(
        std::fs::read_dir(dest.join("cache/empty")).unwrap().count(),
        0
    );
    let mut top: Vec<_> = std::fs::read_dir(&dest)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    top.sort();
    assert_eq!(top, ["cache", "reports", "summary.txt"], "no extra level");
}

#[rstest]
#[tokio::test]
async fn a_second_put_to_a_key_replaces_the_first(
    #[values(Route::Directory, Route::Http)] route: Route,
) {
    let store = store().await;
    let target = route.target(&store);
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    std::fs::write(&first, "first attempt, longer than the second").unwrap();
    std::fs::write(&second, "retried").unwrap();
    let key = "ns/wf/run-1/step/out.tgz";

    artifacts::put_path(&target, key, &first).await.unwrap();
    let stored = artifacts::put_path(&target, key, &second).await.unwrap();

    let listed = artifacts::list(&target, "ns").await.unwrap();
    assert_eq!(listed, [stored], "one object, of the second put");
    let dest = dir.path().join("got");
    artifacts::get_path(&target, key, &dest).await.unwrap();
    assert_eq!(std::fs::read_to_string(dest).unwrap(), "retried");
}

/// On the store's machine the bytes go through its directory: the upload is one part the
/// step wrote there, completed by the store (its ETag a multipart one, where a small upload
/// over HTTP is a plain PUT with an MD5 ETag), announced as any upload, nothing left beside.
#[tokio::test]
async fn a_put_on_the_stores_machine_is_one_part_written_in_its_directory_and_announced() {
    let store = store().await;
    let (puts, mut announced) = tokio::sync::mpsc::unbounded_channel();
    store.notify(puts);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.csv");
    std::fs::write(&file, "a,b\n1,2\n").unwrap();
    let key = "ns/wf/run-1/report/out.tgz";

    let stored = artifacts::put_path(store.target(), key, &file)
        .await
        .unwrap();

    let put = announced.recv().await.unwrap();
    assert_eq!((put.key.as_str(), put.size), (key, stored.size));
    assert!(
        put.etag.ends_with("-1"),
        "a one-part upload's ETag: {put:?}"
    );
    let object = store.dir().join(&store.target().bucket).join(key);
    assert_eq!(std::fs::metadata(&object).unwrap().len(), stored.size);
    let beside: Vec<_> = std::fs::read_dir(store.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with(".upload"))
        .collect();
    assert!(beside.is_empty(), "left of the upload: {beside:?}");
    let got = dir.path().join("got.csv");
    artifacts::get_path(&Route::Http.target(&store), key, &got)
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(got).unwrap(), "a,b\n1,2\n");
}

/// A repository naming a directory this machine does not have (a step on another node) is
/// used over HTTP.
#[tokio::test]
async fn a_directory_the_machine_does_not_have_is_passed_over_for_http() {
    let store = store().await;
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = S3Target {
        local_directory: Some(dir.path().join("on-another-node")),
        ..store.target().clone()
    };
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();

    let stored = artifacts::put_path(&elsewhere, "k/out.tgz", &file)
        .await
        .unwrap();
    let got = dir.path().join("got");
    artifacts::get_path(&elsewhere, &stored.key, &got)
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(got).unwrap(), "x");
    assert!(!dir.path().join("on-another-node").exists());
}

/// The store answers a GET itself in large reads: a range from inside an object, one to its
/// end and a suffix give exactly those bytes, and a GET's ETag and length are HEAD's.
#[tokio::test]
async fn ranges_of_an_object_larger_than_one_read_are_its_bytes_with_heads_etag() {
    use object_store::{GetOptions, GetRange, ObjectStore as _, ObjectStoreExt as _, PutPayload};
    const SIZE: usize = 3 << 20;
    let store = store().await;
    let target = store.target();
    let client = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&target.endpoint)
        .with_bucket_name(&target.bucket)
        .with_region(&target.region)
        .with_access_key_id(&target.access_key)
        .with_secret_access_key(&target.secret_key)
        .with_allow_http(true)
        .build()
        .unwrap();
    let mut bytes = vec![0; SIZE];
    StdRng::seed_from_u64(3).fill_bytes(&mut bytes);
    let path = object_store::path::Path::from("ns/ranges.bin");
    client
        .put(&path, PutPayload::from(bytes.clone()))
        .await
        .unwrap();

    let head = client.head(&path).await.unwrap();
    let whole = client.get(&path).await.unwrap();
    assert_eq!(whole.meta.e_tag, head.e_tag);
    assert_eq!(whole.meta.size, SIZE as u64);
    assert_eq!(whole.bytes().await.unwrap(), bytes);
    let from = (1 << 20) - 7;
    for (range, want) in [
        (
            GetRange::Bounded(from..from + (1 << 20) + 11),
            &bytes[from as usize..][..(1 << 20) + 11],
        ),
        (GetRange::Offset(from), &bytes[from as usize..]),
        (GetRange::Suffix(5000), &bytes[SIZE - 5000..]),
    ] {
        let options = GetOptions {
            range: Some(range.clone()),
            ..GetOptions::default()
        };
        let got = client.get_opts(&path, options).await.unwrap();
        assert_eq!(got.meta.e_tag, head.e_tag, "{range:?}");
        assert_eq!(got.bytes().await.unwrap(), want, "{range:?}");
    }
}

#[rstest]
#[tokio::test]
async fn a_missing_key_is_named_with_its_bucket(
    #[values(Route::Directory, Route::Http)] route: Route,
) {
    let store = store().await;
    let target = route.target(&store);
    let dest = tempfile::tempdir().unwrap().path().join("x");
    let error = artifacts::get_path(&target, "ns/wf/run-1/a/out.tgz", &dest)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "artifact ns/wf/run-1/a/out.tgz not found in bucket workflows"
    );
    assert!(!dest.exists());
}

#[rstest]
#[tokio::test]
async fn a_missing_bucket_and_a_missing_path_are_named(
    #[values(Route::Directory, Route::Http)] route: Route,
) {
    let store = store().await;
    let target = route.target(&store);
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("never-written");
    let error = artifacts::put_path(&target, "k.tgz", &missing)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("output artifact path {} does not exist", missing.display())
    );

    // s3s-fs makes a bucket for a put, so only a listing shows it missing.
    let elsewhere = S3Target {
        bucket: "no-such-bucket".into(),
        ..target.clone()
    };
    let error = artifacts::list(&elsewhere, "ns").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "bucket no-such-bucket does not exist at {}",
            store.endpoint()
        )
    );
}

#[rstest]
#[tokio::test]
async fn a_wrong_secret_key_is_refused_naming_the_endpoint_and_never_shown(
    #[values(Route::Directory, Route::Http)] route: Route,
) {
    let store = store().await;
    let target = route.target(&store);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let wrong_secret = "WRONGsecretKEYwrongSECRETkeyWRONGsecret0";
    let wrong = S3Target {
        secret_key: wrong_secret.into(),
        ..target.clone()
    };

    let put = artifacts::put_path(&wrong, "k.tgz", &file)
        .await
        .unwrap_err();
    let get = artifacts::get_path(&wrong, "k.tgz", &dir.path().join("got"))
        .await
        .unwrap_err();
    let list = artifacts::list(&wrong, "").await.unwrap_err();
    for error in [put, get, list] {
        assert!(matches!(error, Error::Refused { .. }), "{error:?}");
        let text = whole(&error);
        assert!(
            text.starts_with(&format!(
                "the store at {} refused the credentials",
                store.endpoint()
            )),
            "{text}"
        );
        for secret in [wrong_secret, &target.secret_key] {
            assert!(!text.contains(secret), "the secret key shown: {text}");
            assert!(!format!("{error:?}").contains(secret), "{error:?}");
        }
    }
}

#[rstest]
#[tokio::test]
async fn delete_prefix_deletes_the_keys_under_it_and_no_others(
    #[values(Route::Directory, Route::Http)] route: Route,
) {
    let store = store().await;
    let target = route.target(&store);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let keys = [
        "ns/wf/run-1/a/out.tgz",
        "ns/wf/run-1/b/item-0/out.tgz",
        "ns/wf/run-10/a/out.tgz",
        "ns/other/run-1/a/out.tgz",
    ];
    for key in keys {
        artifacts::put_path(&target, key, &file).await.unwrap();
    }

    let deleted = artifacts::delete_prefix(&target, "ns/wf/run-1")
        .await
        .unwrap();
    assert_eq!(deleted, 2);
    let mut left: Vec<String> = artifacts::list(&target, "ns")
        .await
        .unwrap()
        .into_iter()
        .map(|stored| stored.key)
        .collect();
    left.sort();
    assert_eq!(left, ["ns/other/run-1/a/out.tgz", "ns/wf/run-10/a/out.tgz"]);
    let error = artifacts::delete_prefix(&target, "/").await.unwrap_err();
    assert!(matches!(error, Error::EmptyPrefix { .. }), "{error:?}");
}

/// What a step agent does: read the repository from the ConfigMap, the keys from the Secret,
/// and put and get through them.
async fn round_trip_through_the_default_repository(client: kube::Client, namespace: &str) {
    let config_map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get(embedded::REPOSITORY_CONFIGMAP)
        .await
        .expect("the repository's ConfigMap");
    let yaml = &config_map.data.unwrap()[embedded::REPOSITORY_KEY];
    let repository: ArtifactRepository = serde_yaml::from_str(yaml).expect(yaml);
    let s3 = repository.s3.expect("an s3 repository");
    assert_eq!(s3.bucket, "workflows", "{yaml}");
    let secret = Api::<Secret>::namespaced(client, namespace)
        .get(&s3.credentials_secret.name)
        .await
        .expect("the credentials Secret");
    let data = secret.data.unwrap();
    let key = |name: &str| String::from_utf8(data[name].0.clone()).unwrap();
    let target = S3Target::from_repository(&s3, &key("accessKey"), &key("secretKey"));

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), "through the cluster").unwrap();
    artifacts::put_path(&target, "ns/wf/f.tgz", &dir.path().join("file"))
        .await
        .unwrap();
    artifacts::get_path(&target, "ns/wf/f.tgz", &dir.path().join("got"))
        .await
        .unwrap();
    let got = std::fs::read_to_string(dir.path().join("got")).unwrap();
    assert_eq!(got, "through the cluster");
}

#[rstest]
#[tokio::test]
async fn the_default_repository_written_into_a_cluster_reaches_the_store(
    #[future(awt)] namespace: Namespace,
) {
    let store = store().await;
    embedded::install_default_repository(namespace.client(), &namespace.name, &store)
        .await
        .unwrap();
    // A second install (a restarted `dev`) replaces both objects.
    embedded::install_default_repository(namespace.client(), &namespace.name, &store)
        .await
        .unwrap();
    round_trip_through_the_default_repository(namespace.client(), &namespace.name).await;
}

#[tokio::test]
async fn dev_prints_the_artifact_store_and_writes_the_default_repository_into_the_cluster() {
    let kept = tempfile::tempdir().unwrap();
    let dev = start_dev(&["--artifact-dir", kept.path().to_str().unwrap()]);
    assert!(
        dev.store_line
            .starts_with("artifact store at http://127.0.0.1:"),
        "{}",
        dev.store_line
    );
    assert_eq!(dev.store_dir(), kept.path(), "{}", dev.store_line);
    round_trip_through_the_default_repository(dev.client().await, "default").await;
    dev.stop();
    assert!(
        kept.path().join("workflows/ns/wf/f.tgz").is_file(),
        "--artifact-dir keeps the bucket after exit"
    );

    let dev = start_dev(&[]);
    let temporary = dev.store_dir();
    assert!(temporary.join("workflows").is_dir(), "{}", dev.store_line);
    dev.stop();
    assert!(
        !temporary.exists(),
        "the temporary directory is removed at exit"
    );
}

/// `dev`'s store is every namespace's repository, as Argo's controller-wide one: a workflow
/// with artifacts in a namespace made after `dev` started (no ConfigMap of its own) passes
/// them between its steps.
#[test]
fn dev_serves_artifacts_in_every_namespace() {
    let team = super::artifacts::passing_manifest("shared", "").replace(
        "metadata: {name: shared}",
        "metadata: {name: shared, namespace: team}",
    );
    let manifest = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: team}}\n---{team}");
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(manifest.as_bytes()).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["dev", "--web-addr", "off", "--until-done", "--apply"])
        .arg(file.path())
        .output()
        .expect("dev runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{printed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        printed.contains("workflow team/shared Completed"),
        "{printed}"
    );
}

/// Medians of 5 rounds (each: `cp`, then put, then get) of a 100 MiB file of random bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run with --release --ignored --nocapture"]
async fn throughput_of_a_100_mib_file_against_cp() {
    const SIZE: usize = 100 << 20;
    let store = store().await;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source.bin");
    random_file(&source, SIZE, 7);
    let (mut cp, mut put, mut get) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..5 {
        let copy = dir.path().join(format!("copy-{round}"));
        let started = Instant::now();
        let status = Command::new("cp").arg(&source).arg(&copy).status().unwrap();
        assert!(status.success());
        cp.push(started.elapsed());

        let key = format!("bench/{round}.tgz");
        let started = Instant::now();
        artifacts::put_path(store.target(), &key, &source)
            .await
            .unwrap();
        put.push(started.elapsed());

        let got = dir.path().join(format!("got-{round}"));
        let started = Instant::now();
        artifacts::get_path(store.target(), &key, &got)
            .await
            .unwrap();
        get.push(started.elapsed());
        assert_eq!(std::fs::metadata(&got).unwrap().len(), SIZE as u64);
        for path in [copy, got] {
            std::fs::remove_file(path).unwrap();
        }
    }
    for (what, times) in [("cp", cp), ("put_path", put), ("get_path", get)] {
        let median = median(times);
        let rate = SIZE as f64 / (1 << 20) as f64 / median.as_secs_f64();
        println!("{what:>8}: median {median:>10.3?}  {rate:7.1} MiB/s");
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
