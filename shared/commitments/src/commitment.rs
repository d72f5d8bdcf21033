//! The commitment record and its pure state machine (openwop-agent-memory §"Inferred
//! commitments", RFC 0068 clauses 1–2).
//!
//! Clause 1 binds a commitment to the memoryRef and tenant it came from: the record carries both,
//! plus the source entry ids (provenance) and nothing of the entry's text. Clause 2 asks for at
//! most one fire per scheduled instant (time) and per false-to-true transition (predicate):
//!
//! ```text
//! time:       Armed --tick, now >= due--> Fired            (terminal; fired = [due])
//! predicate:  Armed --holds--> Satisfied --not holds--> Armed --holds--> Satisfied ...
//!                     (fire)                (re-arm)              (fire again)
//! any:        Armed | Fired | Satisfied --cancel--> Cancelled   (terminal, never fires)
//! ```
//!
//! The functions here only decide. The store applies a decision with a conditional write whose
//! condition is the state the decision was computed from (`state = :from`), so of two
//! concurrent or duplicate evaluations exactly one wins and the other sees the new state and
//! decides [`Transition::Nothing`]. The fire instant is part of the transition and is recorded
//! in `fired`, so a retry after a crash recomputes the same event id and run id from the record.

use std::fmt;
use std::str::FromStr;

use crate::{ids, CommitmentError, Condition, Inferred};

/// Fire instants kept on a predicate commitment (oldest dropped first). A predicate can flip
/// any number of times; the record must stay well under DynamoDB's 400 KB item limit. A time
/// commitment fires once, so this never bites it.
pub const MAX_FIRED_HISTORY: usize = 64;

/// Where a commitment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Waiting: a time commitment whose instant has not fired, or a predicate commitment whose
    /// predicate was last seen false (or never evaluated).
    Armed,
    /// A time commitment that has fired its instant. Terminal.
    Fired,
    /// A predicate commitment that fired for the current true period; re-armed when the
    /// predicate is seen false.
    Satisfied,
    /// Withdrawn (forget, deletion of the source, an operator). Terminal; never fires.
    Cancelled,
}

impl State {
    /// The stored spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            State::Armed => "armed",
            State::Fired => "fired",
            State::Satisfied => "satisfied",
            State::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for State {
    type Err = CommitmentError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "armed" => State::Armed,
            "fired" => State::Fired,
            "satisfied" => State::Satisfied,
            "cancelled" => State::Cancelled,
            _ => return Err(CommitmentError::Corrupt { field: "state" }),
        })
    }
}

/// A decision of the state machine, to be applied with [`Commitment::apply`] under a
/// conditional write on the state it was computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Fire once for `instant_ms` (the `scheduledFor` of `commitment.fired`; the event's
    /// `firedAt` is the caller's clock). The same commitment and instant always give the same
    /// [`ids::fire_event_id`] and [`ids::run_id`].
    Fire { instant_ms: i64 },
    /// The predicate went false: arm again for its next false-to-true transition.
    Rearm,
    /// Withdraw the commitment.
    Cancel,
    /// Nothing to do (not yet due, already fired, predicate unchanged, cancelled…).
    Nothing,
}

impl Transition {
    fn name(&self) -> &'static str {
        match self {
            Transition::Fire { .. } => "fire",
            Transition::Rearm => "rearm",
            Transition::Cancel => "cancel",
            Transition::Nothing => "nothing",
        }
    }
}

/// One inferred commitment. Holds identifiers, the condition and the lifecycle — no intention
/// text — so the record, its `Debug` output and every event built from it are content-free
/// (a predicate tag is hidden from `Debug`, see [`Condition`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commitment {
    /// [`ids::commitment_id`] of the first source entry, rule and condition.
    pub id: String,
    pub tenant_id: String,
    pub memory_ref: String,
    /// Entries this commitment was inferred from; forget cancels the commitment when it reaches
    /// any of them.
    pub source_entry_ids: Vec<String>,
    pub condition: Condition,
    pub state: State,
    /// Instants already fired: the due instant of a time commitment, or one instant per
    /// false-to-true transition of a predicate commitment (at most [`MAX_FIRED_HISTORY`]).
    pub fired: Vec<i64>,
    pub created_at_ms: i64,
}

impl Commitment {
    /// A new, armed commitment for what [`crate::infer()`] found in entry `source_entry_id`.
    /// A predicate commitment starts armed, i.e. as if its predicate were false before the
    /// entry was written: if the tag is already present, the first evaluation fires.
    pub fn new(
        tenant_id: &str,
        memory_ref: &str,
        source_entry_id: &str,
        inferred: &Inferred,
        created_at_ms: i64,
    ) -> Commitment {
        Commitment {
            id: ids::commitment_id(
                tenant_id,
                memory_ref,
                source_entry_id,
                inferred.rule,
                &inferred.condition,
            ),
            tenant_id: tenant_id.to_string(),
            memory_ref: memory_ref.to_string(),
            source_entry_ids: vec![source_entry_id.to_string()],
            condition: inferred.condition.clone(),
            state: State::Armed,
            fired: Vec::new(),
            created_at_ms,
        }
    }

    /// The key for the store's due-time index: `Some(due)` exactly while this is an armed time
    /// commitment. Write the attribute only when `Some` (and remove it on any transition), so
    /// the index is sparse and a due query reads only commitments that can still fire.
    pub fn scheduled_for(&self) -> Option<i64> {
        match (&self.condition, self.state) {
            (Condition::At { due_ms }, State::Armed) => Some(*due_ms),
            _ => None,
        }
    }

    /// The instant to fire now, if any: an armed time commitment whose instant is at or before
    /// `now_ms` and not yet fired. Never before the instant; a late tick (outage, backlog)
    /// still fires it, so a fire is delayed but never lost.
    pub fn due(&self, now_ms: i64) -> Option<i64> {
        self.scheduled_for()
            .filter(|&due| due <= now_ms && !self.fired.contains(&due))
    }

    /// The scheduler's evaluation: [`Transition::Fire`] for the due instant, else nothing.
    /// The instant is the scheduled one, not `now_ms`, so duplicate ticks compute the same ids.
    pub fn on_tick(&self, now_ms: i64) -> Transition {
        match self.due(now_ms) {
            Some(instant_ms) => Transition::Fire { instant_ms },
            None => Transition::Nothing,
        }
    }

    /// A predicate evaluation after a `memory.written` (or a delete/expiry sweep): `holds` is
    /// [`crate::predicate_holds`] over the ref's live entries, `observed_at_ms` the instant of
    /// the triggering write (pass the event's entry `createdAt`, not the handler's clock, so
    /// duplicate deliveries of one event compute the same instant).
    ///
    /// Armed + holds fires; Satisfied + not holds re-arms; everything else is nothing. The fire
    /// instant is `observed_at_ms`, raised to one past the last fired instant when needed, so
    /// every transition of one commitment has its own event id even if clocks disagree.
    pub fn on_predicate(&self, holds: bool, observed_at_ms: i64) -> Transition {
        if !matches!(self.condition, Condition::Predicate { .. }) {
            return Transition::Nothing;
        }
        match (self.state, holds) {
            (State::Armed, true) => {
                let floor = self.fired.last().map_or(i64::MIN, |l| l.saturating_add(1));
                Transition::Fire {
                    instant_ms: observed_at_ms.max(floor),
                }
            }
            (State::Satisfied, false) => Transition::Rearm,
            _ => Transition::Nothing,
        }
    }

    /// Withdraws the commitment (forget, operator action). Nothing if already cancelled, so a
    /// retried forget counts each commitment once.
    pub fn cancel(&self) -> Transition {
        match self.state {
            State::Cancelled => Transition::Nothing,
            _ => Transition::Cancel,
        }
    }

    /// The record after `t`, or an error if `t` is not allowed from the current state (a stale
    /// decision: the store's conditional write would reject it too).
    pub fn apply(&self, t: Transition) -> Result<Commitment, CommitmentError> {
        let invalid = CommitmentError::InvalidTransition {
            from: self.state,
            transition: t.name(),
        };
        let mut next = self.clone();
        match (t, &self.condition, self.state) {
            (Transition::Nothing, _, _) => {}
            (Transition::Fire { instant_ms }, Condition::At { due_ms }, State::Armed)
                if instant_ms == *due_ms && !self.fired.contains(&instant_ms) =>
            {
                next.state = State::Fired;
                next.fired.push(instant_ms);
            }
            (Transition::Fire { instant_ms }, Condition::Predicate { .. }, State::Armed)
                if self.fired.last().is_none_or(|&last| instant_ms > last) =>
            {
                next.state = State::Satisfied;
                next.fired.push(instant_ms);
                let excess = next.fired.len().saturating_sub(MAX_FIRED_HISTORY);
                next.fired.drain(..excess);
            }
            (Transition::Rearm, Condition::Predicate { .. }, State::Satisfied) => {
                next.state = State::Armed;
            }
            (Transition::Cancel, _, _) => next.state = State::Cancelled,
            _ => return Err(invalid),
        }
        Ok(next)
    }

    /// `commitment.fired` dedupe id for a fire at `instant_ms`.
    pub fn fire_event_id(&self, instant_ms: i64) -> String {
        ids::fire_event_id(&self.id, instant_ms)
    }

    /// runId of the run enqueued for a fire at `instant_ms`.
    pub fn run_id(&self, instant_ms: i64) -> String {
        ids::run_id(&self.id, instant_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REF: &str = "workspaces/t1/agents/a1/memories";
    const DUE: i64 = 1_795_165_200_000; // 2026-11-21T09:00:00Z

    fn time_commitment() -> Commitment {
        let inferred = Inferred {
            condition: Condition::At { due_ms: DUE },
            rule: "time.tomorrow",
        };
        Commitment::new("t1", REF, "e1", &inferred, DUE - 64_800_000)
    }

    fn predicate_commitment() -> Commitment {
        let inferred = Inferred {
            condition: Condition::Predicate {
                tag: "when:invoice-clears".into(),
            },
            rule: "predicate.when",
        };
        Commitment::new("t1", REF, "e1", &inferred, 1_000)
    }

    /// Runs `t` through `apply`, as the store would after winning its conditional write.
    fn step(c: &Commitment, t: Transition) -> Commitment {
        c.apply(t)
            .expect("transition computed from this state is valid")
    }

    #[test]
    fn new_commitment_is_armed_bound_and_content_free() {
        let c = time_commitment();
        assert_eq!(c.state, State::Armed);
        assert_eq!((c.tenant_id.as_str(), c.memory_ref.as_str()), ("t1", REF));
        assert_eq!(c.source_entry_ids, vec!["e1"]);
        assert!(c.fired.is_empty());
        assert_eq!(
            c.id,
            ids::commitment_id("t1", REF, "e1", "time.tomorrow", &c.condition)
        );
        let p = predicate_commitment();
        assert!(!format!("{p:?}").contains("invoice"), "{p:?}");
    }

    #[test]
    fn time_commitment_never_fires_before_its_instant() {
        let c = time_commitment();
        assert_eq!(c.scheduled_for(), Some(DUE));
        for now in [i64::MIN, 0, DUE - 60_000, DUE - 1] {
            assert_eq!(c.due(now), None);
            assert_eq!(c.on_tick(now), Transition::Nothing);
        }
    }

    #[test]
    fn time_commitment_fires_once_at_the_instant() {
        let c = time_commitment();
        assert_eq!(c.on_tick(DUE), Transition::Fire { instant_ms: DUE });
        let fired = step(&c, c.on_tick(DUE));
        assert_eq!(fired.state, State::Fired);
        assert_eq!(fired.fired, vec![DUE]);
        assert_eq!(fired.scheduled_for(), None, "leaves the due index");
        // A second evaluation (duplicate delivery, next minute, much later) does nothing.
        for now in [DUE, DUE + 60_000, i64::MAX] {
            assert_eq!(fired.due(now), None);
            assert_eq!(fired.on_tick(now), Transition::Nothing);
        }
        // A stale duplicate decision cannot be applied to the new state.
        assert!(matches!(
            fired.apply(Transition::Fire { instant_ms: DUE }),
            Err(CommitmentError::InvalidTransition {
                from: State::Fired,
                transition: "fire"
            })
        ));
    }

    #[test]
    fn late_tick_still_fires_the_scheduled_instant() {
        let c = time_commitment();
        let late = DUE + 3 * 3_600_000;
        assert_eq!(c.on_tick(late), Transition::Fire { instant_ms: DUE });
        assert_eq!(c.fire_event_id(DUE), ids::fire_event_id(&c.id, DUE));
    }

    #[test]
    fn time_commitment_rejects_wrong_instant_and_predicate_moves() {
        let c = time_commitment();
        assert!(c
            .apply(Transition::Fire {
                instant_ms: DUE + 1
            })
            .is_err());
        assert!(c.apply(Transition::Rearm).is_err());
        assert_eq!(c.on_predicate(true, DUE), Transition::Nothing);
        assert_eq!(c.apply(Transition::Nothing), Ok(c.clone()));
    }

    #[test]
    fn predicate_fires_on_each_false_to_true_transition_only() {
        let c = predicate_commitment();
        assert_eq!(
            c.scheduled_for(),
            None,
            "predicates are never in the due index"
        );
        assert_eq!(c.on_tick(i64::MAX), Transition::Nothing);
        // false -> false: nothing.
        assert_eq!(c.on_predicate(false, 10), Transition::Nothing);
        // false -> true: fire.
        let t1 = c.on_predicate(true, 20);
        assert_eq!(t1, Transition::Fire { instant_ms: 20 });
        let c = step(&c, t1);
        assert_eq!((c.state, c.fired.clone()), (State::Satisfied, vec![20]));
        // true -> true (another matching write, a duplicate event): nothing.
        assert_eq!(c.on_predicate(true, 20), Transition::Nothing);
        assert_eq!(c.on_predicate(true, 30), Transition::Nothing);
        // true -> false: re-arm, no fire.
        let t2 = c.on_predicate(false, 40);
        assert_eq!(t2, Transition::Rearm);
        let c = step(&c, t2);
        assert_eq!((c.state, c.fired.clone()), (State::Armed, vec![20]));
        // false -> true again: fires again, with a new instant and so a new event id.
        let t3 = c.on_predicate(true, 50);
        assert_eq!(t3, Transition::Fire { instant_ms: 50 });
        let c = step(&c, t3);
        assert_eq!((c.state, c.fired.clone()), (State::Satisfied, vec![20, 50]));
        assert_ne!(c.fire_event_id(20), c.fire_event_id(50));
        assert_ne!(c.run_id(20), c.run_id(50));
    }

    #[test]
    fn predicate_fire_instants_strictly_increase() {
        let c = predicate_commitment();
        let c = step(&c, c.on_predicate(true, 100));
        let c = step(&c, c.on_predicate(false, 90));
        // A write stamped earlier than the last fire (clock skew, late delivery) still gets an
        // instant of its own.
        assert_eq!(
            c.on_predicate(true, 50),
            Transition::Fire { instant_ms: 101 }
        );
        // And a stale or replayed fire decision cannot reuse an old instant.
        assert!(c.apply(Transition::Fire { instant_ms: 100 }).is_err());
        let last = Commitment {
            fired: vec![i64::MAX],
            ..c.clone()
        };
        assert_eq!(
            last.on_predicate(true, 0),
            Transition::Fire {
                instant_ms: i64::MAX
            }
        );
        assert!(last
            .apply(Transition::Fire {
                instant_ms: i64::MAX
            })
            .is_err());
    }

    #[test]
    fn predicate_history_is_bounded() {
        let mut c = predicate_commitment();
        for i in 0..(MAX_FIRED_HISTORY as i64 + 10) {
            c = step(&c, c.on_predicate(true, i * 10));
            c = step(&c, c.on_predicate(false, i * 10 + 5));
        }
        assert_eq!(c.fired.len(), MAX_FIRED_HISTORY);
        assert_eq!(c.fired.last(), Some(&((MAX_FIRED_HISTORY as i64 + 9) * 10)));
        assert!(c.fired.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn cancelled_never_fires() {
        for c in [time_commitment(), predicate_commitment()] {
            assert_eq!(c.cancel(), Transition::Cancel);
            let x = step(&c, c.cancel());
            assert_eq!(x.state, State::Cancelled);
            assert_eq!(x.scheduled_for(), None);
            assert_eq!(x.due(i64::MAX), None);
            assert_eq!(x.on_tick(i64::MAX), Transition::Nothing);
            assert_eq!(x.on_predicate(true, 5), Transition::Nothing);
            assert_eq!(x.on_predicate(false, 5), Transition::Nothing);
            assert!(x.apply(Transition::Fire { instant_ms: DUE }).is_err());
            assert!(x.apply(Transition::Rearm).is_err());
            // Cancelling again is a no-op, so a retried forget counts it once.
            assert_eq!(x.cancel(), Transition::Nothing);
            assert_eq!(x.apply(Transition::Cancel), Ok(x.clone()));
        }
    }

    #[test]
    fn fired_and_satisfied_commitments_can_be_cancelled() {
        let c = time_commitment();
        let fired = step(&c, c.on_tick(DUE));
        assert_eq!(step(&fired, fired.cancel()).state, State::Cancelled);
        let p = predicate_commitment();
        let sat = step(&p, p.on_predicate(true, 1));
        let cancelled = step(&sat, sat.cancel());
        assert_eq!(cancelled.state, State::Cancelled);
        assert_eq!(
            cancelled.on_predicate(false, 2),
            Transition::Nothing,
            "no re-arm"
        );
    }

    #[test]
    fn rearm_only_from_satisfied_predicate() {
        let p = predicate_commitment();
        assert!(p.apply(Transition::Rearm).is_err());
        let sat = step(&p, p.on_predicate(true, 1));
        assert_eq!(step(&sat, Transition::Rearm).state, State::Armed);
    }

    #[test]
    fn state_round_trips_through_its_stored_spelling() {
        for s in [
            State::Armed,
            State::Fired,
            State::Satisfied,
            State::Cancelled,
        ] {
            assert_eq!(s.as_str().parse::<State>(), Ok(s));
            assert_eq!(s.to_string(), s.as_str());
        }
        assert_eq!(
            "Armed".parse::<State>(),
            Err(CommitmentError::Corrupt { field: "state" })
        );
    }
}
