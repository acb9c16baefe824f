#!/usr/bin/env python3
"""Writes crates/kube-devcluster/src/apiserver/protobuf/messages.rs: the protobuf messages of the
built-in kinds the embedded control plane stores, as a table its decoder walks (no protoc, no build step).

Usage: scripts/gen-protobuf-schema.py API_DIR APIMACHINERY_DIR [API_REF APIMACHINERY_REF] > out.rs

The table in the repository was generated from the v0.36.3 tags:
  git clone --depth 1 --branch v0.36.3 https://github.com/kubernetes/api /tmp/api
  git clone --depth 1 --branch v0.36.3 https://github.com/kubernetes/apimachinery /tmp/apimachinery
  scripts/gen-protobuf-schema.py /tmp/api /tmp/apimachinery v0.36.3 v0.36.3 \
    > crates/kube-devcluster/src/apiserver/protobuf/messages.rs

API_DIR and APIMACHINERY_DIR are checkouts of github.com/kubernetes/api and
github.com/kubernetes/apimachinery. From each package's generated.proto the table takes every
message's fields: number, name (Kubernetes names proto fields as their JSON keys) and type. From
the package's Go types (the struct tags `json:"..." protobuf:"..."`) it takes what the protobuf
does not say but JSON needs: whether the Go field is a pointer (a pointer's zero value is sent and
kept, a plain field's zero is omitted under omitempty), whether the JSON tag has omitempty or
omitzero (Go 1.24: omit a zero struct, e.g. ObjectMeta.creationTimestamp), and whether the field
is embedded inline (its fields appear in the parent's JSON object).
"""

import os
import re
import sys

# Proto package -> (checkout, directory of its Go package).
PACKAGES = {
    "k8s.io.api.core.v1": ("api", "core/v1"),
    "k8s.io.api.apps.v1": ("api", "apps/v1"),
    "k8s.io.api.batch.v1": ("api", "batch/v1"),
    "k8s.io.api.rbac.v1": ("api", "rbac/v1"),
    "k8s.io.api.coordination.v1": ("api", "coordination/v1"),
    "k8s.io.api.events.v1": ("api", "events/v1"),
    "k8s.io.apimachinery.pkg.apis.meta.v1": ("apimachinery", "pkg/apis/meta/v1"),
    "k8s.io.apimachinery.pkg.runtime": ("apimachinery", "pkg/runtime"),
    "k8s.io.apimachinery.pkg.util.intstr": ("apimachinery", "pkg/util/intstr"),
    "k8s.io.apimachinery.pkg.api.resource": ("apimachinery", "pkg/api/resource"),
}

# The built-in kinds the server stores (src/resources.rs) but CustomResourceDefinition, whose
# messages live in k8s.io/apiextensions-apiserver.
ROOTS = [
    "k8s.io.api.core.v1.Namespace",
    "k8s.io.api.core.v1.Pod",
    "k8s.io.api.core.v1.Event",
    "k8s.io.api.core.v1.ConfigMap",
    "k8s.io.api.core.v1.Secret",
    "k8s.io.api.core.v1.ServiceAccount",
    "k8s.io.api.core.v1.Service",
    "k8s.io.api.batch.v1.Job",
    "k8s.io.api.apps.v1.Deployment",
    "k8s.io.api.events.v1.Event",
    "k8s.io.api.coordination.v1.Lease",
    "k8s.io.api.rbac.v1.Role",
    "k8s.io.api.rbac.v1.RoleBinding",
    "k8s.io.api.rbac.v1.ClusterRole",
    "k8s.io.api.rbac.v1.ClusterRoleBinding",
]

# Messages whose JSON is not an object of their fields; the decoder renders them itself.
SPECIAL = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "RawJson",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "RawJson",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "Quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "IntOrString",
}

SCALARS = {
    "string": "Str",
    "bytes": "Bytes",
    "bool": "Bool",
    "int32": "I32",
    "int64": "I64",
    "uint32": "U32",
    "uint64": "U64",
    "double": "F64",
    "float": "F32",
}

FIELD = re.compile(r"^\s*(optional|repeated)\s+(\S+)\s+(\w+)\s*=\s*(\d+)\s*;")
MAP_FIELD = re.compile(r"^\s*map<\s*(\S+)\s*,\s*(\S+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")


def parse_proto(path, package):
    """{qualified message name: [(number, name, label, key, value)]}"""
    messages = {}
    current = None
    with open(path) as f:
        for line in f:
            line = line.split("//")[0]
            m = re.match(r"^message\s+(\w+)\s*{", line)
            if m:
                current = f"{package}.{m.group(1)}"
                messages[current] = []
                continue
            if line.startswith("}"):
                current = None
                continue
            if current is None:
                continue
            m = FIELD.match(line)
            if m:
                label, typ, name, number = m.groups()
                messages[current].append((int(number), name, label, None, qualify(typ, package)))
                continue
            m = MAP_FIELD.match(line)
            if m:
                key, value, name, number = m.groups()
                messages[current].append(
                    (int(number), name, "map", qualify(key, package), qualify(value, package))
                )
                continue
            if line.strip() and "=" in line and current:
                sys.exit(f"unparsed field in {current}: {line!r}")
    return messages


def qualify(typ, package):
    if typ in SCALARS:
        return typ
    if typ.startswith("."):
        return typ[1:]
    return f"{package}.{typ}"


def parse_go(directory, package):
    """{(qualified struct name, proto field name): (pointer, omitempty, omitzero, inline)}"""
    fields = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".go") or name.endswith("_test.go") or name.startswith("generated") or name.startswith("zz_"):
            continue
        struct = None
        with open(os.path.join(directory, name)) as f:
            for line in f:
                m = re.match(r"^type\s+(\w+)\s+struct\s*{", line)
                if m:
                    struct = f"{package}.{m.group(1)}"
                    continue
                if line.startswith("}"):
                    struct = None
                    continue
                if struct is None or "`" not in line or "protobuf:" not in line:
                    continue
                head, tag = line.split("`")[0], line.split("`")[1]
                words = head.split()
                go_type = words[-1]
                json_tag = re.search(r'json:"([^"]*)"', tag)
                json_parts = json_tag.group(1).split(",") if json_tag else [""]
                proto_name = re.search(r'protobuf:"[^"]*name=(\w+)', tag)
                if proto_name is not None:
                    proto_name = proto_name.group(1)
                elif len(words) == 1:
                    # An embedded struct without a name in its tag: go-to-protobuf names the
                    # field after the type, lower camel case.
                    proto_name = go_type[0].lower() + go_type[1:]
                else:
                    continue
                fields[(struct, proto_name)] = (
                    go_type.startswith("*"),
                    "omitempty" in json_parts[1:],
                    "omitzero" in json_parts[1:],
                    json_parts[0] == "",
                )
    return fields


def main():
    api_dir, machinery_dir = sys.argv[1], sys.argv[2]
    refs = sys.argv[3:5] if len(sys.argv) >= 5 else ["?", "?"]
    roots = {"api": api_dir, "apimachinery": machinery_dir}
    messages, go_fields = {}, {}
    for package, (checkout, directory) in PACKAGES.items():
        path = os.path.join(roots[checkout], directory)
        messages.update(parse_proto(os.path.join(path, "generated.proto"), package))
        go_fields.update(parse_go(path, package))

    # Only what the roots reach.
    reached, todo = set(), list(ROOTS)
    while todo:
        name = todo.pop()
        if name in reached or name in SPECIAL:
            continue
        if name not in messages:
            sys.exit(f"unknown message {name}")
        reached.add(name)
        for _, _, _, key, value in messages[name]:
            if value not in SCALARS:
                todo.append(value)

    def type_expr(typ):
        if typ in SCALARS:
            return SCALARS[typ]
        if typ in SPECIAL:
            return SPECIAL[typ]
        return f'Msg("{typ}")'

    out = []
    out.append("// @generated by scripts/gen-protobuf-schema.py from github.com/kubernetes/api")
    out.append(f"// {refs[0]} and github.com/kubernetes/apimachinery {refs[1]}; do not edit.")
    out.append("//! The protobuf messages of the built-in kinds the server stores (generated).")
    out.append("")
    out.append("use super::schema::{Field, Label::*, Message, Type::*};")
    out.append("")
    out.append("#[rustfmt::skip]")
    out.append("pub(super) static MESSAGES: &[Message] = &[")
    for name in sorted(reached):
        out.append(f'    Message {{ name: "{name}", fields: &[')
        for number, field, label, key, value in sorted(messages[name]):
            pointer, omitempty, omitzero, inline = go_fields.get(
                (name, field), (False, True, False, False)
            )
            if (name, field) not in go_fields:
                print(f"warning: no Go field for {name}.{field}", file=sys.stderr)
            if label == "map":
                lab = f"Map({type_expr(key)})"
            elif label == "repeated":
                lab = "Repeated"
            else:
                lab = "Single"
            out.append(
                f'        Field {{ number: {number}, name: "{field}", label: {lab}, ty: {type_expr(value)}, '
                f"pointer: {str(pointer).lower()}, omitempty: {str(omitempty).lower()}, "
                f"omitzero: {str(omitzero).lower()}, inline: {str(inline).lower()} }},"
            )
        out.append("    ] },")
    out.append("];")
    print("\n".join(out))


if __name__ == "__main__":
    main()
