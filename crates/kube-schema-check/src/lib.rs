//! The checks the Kubernetes API server makes of an object that need nothing but the object (and
//! its CRD's schema): no server, no client, no async runtime. The embedded control plane
//! (kube-devcluster) applies them to every write; the operator's offline `validate` command applies
//! the same ones to a manifest, so what `validate` calls valid the server accepts.
//!
//! - [`schema`]: a CRD's structural schema applied to a custom object (null dropping, pruning,
//!   defaults, validation) and its CEL rules ([`schema::rules`], `x-kubernetes-validations`);
//! - [`object_meta`]: the object's name, label and annotation rules;
//! - [`quantity`]: a resource quantity's value (`2Gi`, `500m`), or that it is none;
//! - [`FieldError`]: what every check reports, one invalid field with the real server's wording.
//!
//! ```
//! use kube_schema_check::object_meta::{self, NameRule};
//! let object = serde_json::json!({"metadata": {"name": "Not_A_Name"}});
//! let errors = object_meta::validate(&object, NameRule::Subdomain, true);
//! assert_eq!(errors[0].field, "metadata.name");
//! ```
#![forbid(unsafe_code)]

pub mod field_error;
pub mod object_meta;
pub mod quantity;
pub mod schema;

pub use field_error::FieldError;
