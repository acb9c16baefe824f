//! The agent's actions against an embedded control plane: a `generateName` made once per Job
//! however often the Job's pod runs, patches by flags, deletes by selector.

use super::*;

use k8s_openapi::api::core::v1::ConfigMap;

async fn cluster() -> (kube_devcluster::DevCluster, Client) {
    let cluster = kube_devcluster::DevCluster::start(kube_devcluster::DevClusterOptions::default())
        .await
        .expect("control plane starts");
    let client = cluster.client();
    (cluster, client)
}

fn task(action: &str, manifest: &str, job: &str) -> ResourceTask {
    ResourceTask {
        action: action.into(),
        manifest: manifest.into(),
        merge_strategy: "strategic".into(),
        namespace: "default".into(),
        job: job.into(),
        parameters: vec![resource_action::JsonPathTask {
            name: "name".into(),
            json_path: "{.metadata.name}".into(),
            default: None,
        }],
        ..ResourceTask::default()
    }
}

const GENERATED: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: cm-, labels: {app: a}}\ndata: {k: v}\n";

async fn config_maps(client: &Client) -> Vec<String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let list = api
        .list(&ListParams::default().labels("app=a"))
        .await
        .unwrap();
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_job_tried_again_takes_the_object_its_first_try_made_another_job_makes_its_own() {
    let (_cluster, client) = cluster().await;
    let first = act_with(&client, &task("create", GENERATED, "wf-1-make"))
        .await
        .unwrap();
    let again = act_with(&client, &task("create", GENERATED, "wf-1-make"))
        .await
        .unwrap();
    assert_eq!(first, again, "the same object, not a second");
    assert_eq!(config_maps(&client).await, [first["name"].clone()]);
    let other = act_with(&client, &task("create", GENERATED, "wf-1-make-retry-1"))
        .await
        .unwrap();
    assert_ne!(other["name"], first["name"]);
    assert_eq!(config_maps(&client).await.len(), 2);
    // An object of that name someone else made is not taken.
    let named = GENERATED.replace("generateName: cm-", "name: taken");
    act_with(&client, &task("create", &named, "someone"))
        .await
        .unwrap();
    let refused = act_with(&client, &task("create", &named, "wf-1-make"))
        .await
        .unwrap_err();
    assert!(refused.contains("creating configmap/taken"), "{refused}");
    assert!(refused.contains("already exists"), "{refused}");
}

#[tokio::test]
async fn a_patch_by_flags_and_a_delete_by_selector_act_on_what_the_flags_name() {
    let (_cluster, client) = cluster().await;
    let named = GENERATED.replace("generateName: cm-", "name: settings");
    act_with(&client, &task("create", &named, "j"))
        .await
        .unwrap();
    let mut patch = task("patch", "data: {k: changed}", "j");
    patch.merge_strategy = "merge".into();
    patch.flags = vec!["configmaps".into(), "settings".into()];
    patch.success_condition = Some("data.k == changed".into());
    assert_eq!(act_with(&client, &patch).await.unwrap()["name"], "settings");
    let mut json = task("patch", "[{op: add, path: /data/n, value: '1'}]", "j");
    json.merge_strategy = "json".into();
    json.flags = vec!["configmap/settings".into()];
    json.success_condition = Some("data.n == 1".into());
    act_with(&client, &json).await.unwrap();
    let mut delete = task("delete", "", "j");
    delete.flags = vec!["configmap".into(), "-l".into(), "app=a".into()];
    delete.parameters[0].default = Some("none".into());
    assert_eq!(act_with(&client, &delete).await.unwrap()["name"], "none");
    assert_eq!(config_maps(&client).await, Vec::<String>::new());
    // Nothing left to delete is no failure.
    act_with(&client, &delete).await.unwrap();
    let mut unknown = task("get", "", "j");
    unknown.flags = vec!["gadgets".into(), "x".into()];
    let refused = act_with(&client, &unknown).await.unwrap_err();
    assert!(
        refused.contains("doesn't have a resource type \"gadgets\""),
        "{refused}"
    );
}
