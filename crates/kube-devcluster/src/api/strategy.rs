//! What a kind's strategy says, as k8s.io/apiserver/pkg/registry/rest declares the strategies
//! (`RESTCreateStrategy`, `RESTUpdateStrategy`, `RESTDeleteStrategy`) that each kind's
//! `pkg/registry/<group>/<kind>/strategy.go` implements. Every served resource carries one
//! ([`crate::api::resources::ResourceInfo::strategy`]); the generic parts (the store, the API
//! server, discovery) read it instead of matching a kind's name. The built-in kinds' strategies
//! are in the crate's `registry` module, one place per kind; a custom resource's is
//! [`CUSTOM_RESOURCE`].

use kube_schema_check::FieldError;
use kube_schema_check::object_meta::NameRule;
use serde_json::Value;

/// The per-kind rules the generic code of the control plane applies.
#[derive(Debug)]
pub struct Strategy {
    /// Whether the server keeps `metadata.generation`: set to 1 on create, bumped by spec
    /// changes and by the start of a deletion (`PrepareForCreate`/`PrepareForUpdate` of the
    /// kinds whose spec a controller observes); `rest.BeforeCreate` leaves it alone otherwise.
    pub tracks_generation: bool,
    /// Whether a delete that removes the object answers with it (`ReturnDeletedObject` of the
    /// kind's storage) rather than a `Success` Status.
    pub delete_returns_object: bool,
    /// Whether the collection can be deleted at once (`DeleteCollection` is served).
    pub delete_collection: bool,
    /// Whether a delete that names no propagation policy orphans the dependents
    /// (`DefaultGarbageCollectionPolicy` returning `OrphanDependents`) rather than deleting
    /// them in the background.
    pub orphans_by_default: bool,
    /// The storage's `Categories()` (`all` for `kubectl get all`).
    pub categories: &'static [&'static str],
    /// Whether `/log` is a subresource.
    pub log_subresource: bool,
    /// Whether `/exec` is a subresource.
    pub exec_subresource: bool,
    /// Whether `/eviction` is a subresource ([`crate::apiserver::eviction`]).
    pub eviction_subresource: bool,
    /// How a name is checked (`ValidateObjectMeta`'s name function).
    pub name_rule: NameRule,
    /// The field labels a field selector may use, when the kind registers its own conversion;
    /// `None` is apimachinery's default (`metadata.name`, `metadata.namespace`).
    pub field_labels: Option<FieldLabels>,
    /// What decoding a written object does to it (conversion and `SetDefaults_*`), on every
    /// create, update, patch and apply.
    pub decode: fn(&mut Value),
    /// What a new object gets once it has its identity (uid), before it is stored
    /// (`PrepareForCreate`).
    pub prepare_for_create: fn(&mut Value),
    /// What an update (the new object, then the stored one) takes from the stored object
    /// before it is validated (`PrepareForUpdate` and the storage's own update hooks).
    pub prepare_for_update: fn(&mut Value, &Value),
    /// The kind's problems in a create (`old` is `None`) or an update, beyond its metadata and
    /// its schema (`Validate`, `ValidateUpdate`).
    pub validate: fn(&Value, Option<&Value>) -> Vec<FieldError>,
}

/// A kind's own field-label conversion (`AddFieldLabelConversionFunc`).
#[derive(Debug)]
pub struct FieldLabels {
    /// The labels the conversion accepts.
    pub labels: &'static [&'static str],
    /// Labels that select on another path of the stored object: (label, path).
    pub paths: &'static [(&'static str, &'static str)],
    /// What a label whose field is not a string selects on when the object lacks the field:
    /// Go's zero value as the kind's `ToSelectableFields` prints it (`false`, `0`); (label,
    /// value). A string field absent is the empty string.
    pub absent: &'static [(&'static str, &'static str)],
    /// The kind a refusal names, for conversions that word it their own way
    /// (`field label "x" not supported for Job`); `None` for the common wording.
    pub refusal_names: Option<&'static str>,
}

impl FieldLabels {
    /// The conversion of a kind that only lists its labels.
    pub const fn of(labels: &'static [&'static str]) -> Self {
        Self {
            labels,
            paths: &[],
            absent: &[],
            refusal_names: None,
        }
    }
}

fn unchanged(_: &mut Value) {}

fn nothing_kept(_: &mut Value, _: &Value) {}

fn valid(_: &Value, _: Option<&Value>) -> Vec<FieldError> {
    Vec::new()
}

impl Strategy {
    /// A built-in kind with no rules of its own: no generation, a Status on delete, deletable
    /// as a collection, dependents deleted in the background, a DNS subdomain as name.
    pub const DEFAULT: Strategy = Strategy {
        tracks_generation: false,
        delete_returns_object: false,
        delete_collection: true,
        orphans_by_default: false,
        categories: &[],
        log_subresource: false,
        exec_subresource: false,
        eviction_subresource: false,
        name_rule: NameRule::Subdomain,
        field_labels: None,
        decode: unchanged,
        prepare_for_create: unchanged,
        prepare_for_update: nothing_kept,
        validate: valid,
    };
}

/// The strategy of every custom resource (k8s.io/apiextensions-apiserver
/// pkg/registry/customresource/strategy.go): it keeps `metadata.generation`; its field labels
/// come from its CRD's `selectableFields`, its defaults and validation from its schema.
pub static CUSTOM_RESOURCE: Strategy = Strategy {
    tracks_generation: true,
    ..Strategy::DEFAULT
};
