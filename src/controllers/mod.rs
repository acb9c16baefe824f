//! The operator's controllers, each a folder whose reconcile reads as its stages: the
//! [`workflow`] controller, and the [`cron`] controller that starts workflows on a schedule.

pub mod cron;
pub mod workflow;
