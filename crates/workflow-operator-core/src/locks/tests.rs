use super::*;
use crate::crd::{MutexRef, SemaphoreRef};

fn held(slot: u32, by: &str) -> Held {
    Held {
        lease: format!("lease-{slot}"),
        uid: format!("uid-{slot}"),
        slot,
        holder: format!("holder-{by}"),
        by: by.to_string(),
    }
}

fn semaphore(limit: u32) -> Lock {
    Lock {
        kind: Kind::Semaphore,
        name: "db".into(),
        limit,
    }
}

#[test]
fn a_mutex_has_one_slot() {
    let mutex = Lock {
        kind: Kind::Mutex,
        name: "deploy-prod".into(),
        limit: 1,
    };
    assert_eq!(take(&mutex, &[]), Take::Slot(0));
    assert_eq!(
        take(&mutex, &[held(0, "ns/a")]),
        Take::Full(vec!["ns/a".into()])
    );
    assert_eq!(
        waiting_message(&mutex, &["ns/a".into()]),
        "waiting for mutex deploy-prod held by ns/a"
    );
}

#[test]
fn a_semaphore_gives_the_lowest_free_slot_up_to_its_limit() {
    let db = semaphore(3);
    assert_eq!(take(&db, &[held(0, "a"), held(2, "c")]), Take::Slot(1));
    assert!(matches!(
        take(&db, &[held(0, "a"), held(1, "b"), held(2, "c")]),
        Take::Full(_)
    ));
}

#[test]
fn a_lowered_limit_lets_nobody_in_until_the_holders_are_below_it() {
    // Lowered from 4 to 3 while slots 0 and 3 are held: two holders, but one above the limit.
    let db = semaphore(3);
    assert!(matches!(
        take(&db, &[held(0, "a"), held(3, "d")]),
        Take::Full(_)
    ));
    assert_eq!(take(&db, &[held(0, "a")]), Take::Slot(1));
    // Raised: the new slots are free.
    assert_eq!(
        take(&semaphore(5), &[held(0, "a"), held(3, "d")]),
        Take::Slot(1)
    );
}

#[test]
fn locks_are_taken_in_one_order_and_each_has_its_own_leases() {
    let sync = Synchronization {
        mutexes: vec![
            MutexRef { name: "b".into() },
            MutexRef { name: "a".into() },
            MutexRef { name: "a".into() },
        ],
        semaphores: vec![SemaphoreRef {
            name: "a".into(),
            limit: Some(2.into()),
            limit_from: None,
        }],
    };
    let locks = locks_of(Some(&sync));
    let ids: Vec<String> = locks.iter().map(Lock::id).collect();
    assert_eq!(ids, ["mutex/a", "mutex/b", "semaphore/a"]);
    let names = [
        locks[0].lease_name(0),
        locks[1].lease_name(0),
        locks[2].lease_name(0),
        locks[2].lease_name(1),
    ];
    let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
    assert_eq!(distinct.len(), 4, "{names:?}");
    assert!(
        names.iter().all(|n| n.len() <= 63 && n.starts_with("wf-")),
        "{names:?}"
    );
    assert_ne!(locks[0].key(), locks[2].key());
}
