//! A Kopf-style handler framework on kube-runtime, generic over any `kube::Resource`.
