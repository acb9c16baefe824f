//! How a response renders the objects it carries, as the client's `Accept` header asks: as
//! stored, as `meta.k8s.io/v1` `PartialObjectMetadata` (what kube-rs's `get_metadata`,
//! `patch_metadata`, `list_metadata` and `watch_metadata` ask for), or as a `Table` (kubectl's
//! printing, [`crate::apiserver::representation::table`]).
//!
//! The real server answers a metadata request with the metadata alone, whatever the object's
//! size; answering with the whole object would make every metadata write of a large object cost
//! the client a parse of all of it, which a benchmark against this server would then count.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::resources::ResourceInfo;
use crate::storage::store::StoredObject;
use table::IncludeObject;

mod pod_row;
pub mod table;

/// The rendering a request asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Representation {
    /// The object as stored.
    #[default]
    Object,
    /// `PartialObjectMetadata` (`PartialObjectMetadataList` for a list).
    Metadata,
    /// A `Table`, its rows carrying what `includeObject` says.
    Table(IncludeObject),
}

impl Representation {
    /// From the `Accept` header and the `includeObject` parameter. Like the real server, the
    /// first media type decides (kubectl offers a Table first, then plain JSON).
    pub fn from_accept(accept: &str, include_object: Option<&str>) -> Self {
        let first = accept.split(',').next().unwrap_or_default();
        let is_meta = first.contains("g=meta.k8s.io");
        if first.contains("as=Table") {
            Representation::Table(IncludeObject::parse(include_object))
        } else if is_meta && first.contains("as=PartialObjectMetadata") {
            Representation::Metadata
        } else {
            Representation::Object
        }
    }
}

/// `obj` as a `PartialObjectMetadata`: kind, apiVersion and its metadata.
pub fn partial_metadata(obj: &StoredObject) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.value.get("metadata").cloned().unwrap_or_default(),
    })
}

/// One object rendered as asked, or `None` for [`Representation::Object`], whose bytes are the
/// stored ones.
pub fn render_one(
    representation: Representation,
    info: &ResourceInfo,
    obj: &Arc<StoredObject>,
    columns: bool,
) -> Option<Value> {
    match representation {
        Representation::Object => None,
        Representation::Metadata => Some(partial_metadata(obj)),
        Representation::Table(include) => Some(table::table(
            info,
            std::slice::from_ref(obj),
            include,
            json!({"resourceVersion": obj.resource_version().to_string()}),
            columns,
        )),
    }
}

/// A list of `items` rendered as asked, or `None` for [`Representation::Object`].
pub fn render_list(
    representation: Representation,
    info: &ResourceInfo,
    items: &[Arc<StoredObject>],
    metadata: Value,
) -> Option<Value> {
    match representation {
        Representation::Object => None,
        Representation::Metadata => Some(json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": metadata,
            "items": items.iter().map(|o| partial_metadata(o)).collect::<Vec<_>>(),
        })),
        Representation::Table(include) => Some(table::table(info, items, include, metadata, true)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_media_type_decides() {
        let meta = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        assert_eq!(
            Representation::from_accept(meta, None),
            Representation::Metadata
        );
        let meta_list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(
            Representation::from_accept(meta_list, None),
            Representation::Metadata
        );
        assert_eq!(
            Representation::from_accept(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
                Some("Object")
            ),
            Representation::Table(IncludeObject::Object)
        );
        assert_eq!(
            Representation::from_accept(&format!("application/json, {meta}"), None),
            Representation::Object
        );
        assert_eq!(
            Representation::from_accept("", None),
            Representation::Object
        );
    }
}
