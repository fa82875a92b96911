//! Calls take turns on the server's one store in the order they arrived (README, "Agents:
//! memscope as an MCP server").
//!
//! A plain `Mutex` is not first-come-first-served: calls a host sent at once ran in whichever
//! order the blocking pool's threads reached it (a `recall` sent second went first), so a
//! server's answers did not follow its input and two `remember`s of one memory sent in one
//! order could land in the other. A call takes a [`Ticket`] as it arrives — on the runtime's
//! one thread, in the order rmcp reads the requests — and its thread waits for that ticket's
//! turn.

use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// The queue of calls: tickets handed out, the one being served, and those given back
/// unserved.
#[derive(Default)]
pub struct Turns {
    queue: Mutex<Queue>,
    moved: Condvar,
}

#[derive(Default)]
struct Queue {
    /// The number the next ticket gets.
    next: u64,
    /// The ticket whose turn it is.
    serving: u64,
    /// Tickets dropped before their turn (a call whose task never ran): skipped.
    left: BTreeSet<u64>,
}

impl Queue {
    /// The turn goes to the next ticket still waiting.
    fn pass(&mut self) {
        self.serving += 1;
        while self.left.remove(&self.serving) {
            self.serving += 1;
        }
    }
}

impl Turns {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // The queue's own lock guards only these numbers, never a call: a panic cannot leave
        // them half-changed.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place in the queue, behind every ticket handed out before it.
    pub fn ticket(self: &Arc<Self>) -> Ticket {
        let mut queue = self.queue();
        let number = queue.next;
        queue.next += 1;
        Ticket {
            turns: Arc::clone(self),
            number,
            waited: false,
        }
    }

    fn pass(&self) {
        self.queue().pass();
        self.moved.notify_all();
    }
}

/// A call's place in the queue. Dropped without [`Ticket::wait`], it gives its turn away.
pub struct Ticket {
    turns: Arc<Turns>,
    number: u64,
    waited: bool,
}

impl Ticket {
    /// Blocks until every ticket before this one has had its turn; the turn lasts as long as
    /// the [`Turn`] returned.
    pub fn wait(mut self) -> Turn {
        let mut queue = self.turns.queue();
        while queue.serving != self.number {
            queue = self
                .turns
                .moved
                .wait(queue)
                .unwrap_or_else(|e| e.into_inner());
        }
        drop(queue);
        self.waited = true;
        Turn {
            turns: Arc::clone(&self.turns),
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.waited {
            return;
        }
        let mut queue = self.turns.queue();
        if queue.serving == self.number {
            drop(queue);
            self.turns.pass();
        } else {
            queue.left.insert(self.number);
        }
    }
}

/// A call's turn: the next ticket's begins when this is dropped (a call that panicked
/// included).
pub struct Turn {
    turns: Arc<Turns>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.turns.pass();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Threads that reach the queue in the reverse of their tickets' order are still served
    /// in the tickets' order.
    #[test]
    fn tickets_are_served_in_the_order_they_were_taken() {
        let turns = Arc::new(Turns::default());
        let served = Arc::new(Mutex::new(Vec::new()));
        let tickets: Vec<Ticket> = (0..6).map(|_| turns.ticket()).collect();
        let threads: Vec<_> = tickets
            .into_iter()
            .enumerate()
            .rev()
            .map(|(i, ticket)| {
                let served = Arc::clone(&served);
                // The later tickets start waiting first.
                std::thread::sleep(Duration::from_millis(20));
                std::thread::spawn(move || {
                    let _turn = ticket.wait();
                    served.lock().unwrap().push(i);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*served.lock().unwrap(), [0, 1, 2, 3, 4, 5]);
    }

    /// Waits for `ticket`'s turn on a thread of its own, for at most 10 s: a queue that never
    /// comes to it fails the test instead of hanging it.
    fn served(ticket: Ticket) {
        let (done, waiting) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(ticket.wait());
            done.send(()).unwrap();
        });
        waiting
            .recv_timeout(Duration::from_secs(10))
            .expect("the ticket's turn comes");
    }

    /// A ticket dropped unserved — before its turn or at it — holds no one up, and a turn
    /// that ends in a panic passes on.
    #[test]
    fn a_dropped_ticket_or_a_panicked_turn_holds_no_one_up() {
        let turns = Arc::new(Turns::default());
        let first = turns.ticket();
        let skipped = turns.ticket();
        let third = turns.ticket();
        let fourth = turns.ticket();
        drop(skipped);
        let panicked = std::thread::spawn(move || {
            let _turn = first.wait();
            panic!("a call that panicked");
        });
        assert!(panicked.join().is_err());
        served(third);
        // Its turn has come when it is dropped: the next ticket's begins.
        let at_its_turn = turns.ticket();
        let last = turns.ticket();
        served(fourth);
        drop(at_its_turn);
        served(last);
    }
}
