//! The WorkFlow operator: CRD types, DAG, planner, lifecycle and handlers.
