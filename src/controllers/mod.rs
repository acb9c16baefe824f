//! The operator's controllers, each a folder whose reconcile reads as its stages: today the
//! [`workflow`] controller; controllers of other kinds (schedules, templates) go beside it.

pub mod workflow;
