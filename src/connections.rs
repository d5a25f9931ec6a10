//! Connections per source address: the accepting loop ([`crate::app`]) admits a new connection
//! only while its peer holds fewer than `GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS` open ones, so one
//! address cannot take every place of `GATEHOUSE_MAX_CONNECTIONS` (slow bodies and slow heads
//! from one machine leave room for everyone else).
//!
//! The count is of the **TCP peer**: an IPv4 address (also IPv4-mapped), or the /64 network of
//! an IPv6 address ([`crate::domain::throttle::source_key`]'s rule, since one subscriber holds a
//! whole /64). A peer inside `GATEHOUSE_TRUSTED_PROXIES` is not counted: every client behind a
//! reverse proxy arrives from the proxy's address, and which client a connection carries is
//! only known from its `X-Forwarded-For` header, after the connection is admitted. Behind a
//! proxy the per-address cap is therefore the proxy's job (`docs/deploying.md`).
//!
//! Cost per connection: one short lock of a map when it opens and one when it closes (O(1)
//! each); the map holds only addresses with open connections.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// What connections are counted by: an IPv4 address, or an IPv6 /64 network (its first four
/// segments; an IPv4-mapped IPv6 address counts as the IPv4 address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Source {
    V4(std::net::Ipv4Addr),
    V6Net([u16; 4]),
}

impl Source {
    fn of(ip: IpAddr) -> Source {
        match ip {
            IpAddr::V4(v4) => Source::V4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Source::V4(v4),
                None => {
                    let s = Ipv6Addr::segments(&v6);
                    Source::V6Net([s[0], s[1], s[2], s[3]])
                }
            },
        }
    }
}

/// The open connections of every source address, against one cap.
#[derive(Debug)]
pub struct PerAddress {
    cap: usize,
    exempt: Vec<ipnet::IpNet>,
    open: Arc<Mutex<HashMap<Source, usize>>>,
}

/// A place held by one open connection; dropping it (the connection closed) gives it back.
#[derive(Debug)]
pub struct Place {
    source: Option<Source>,
    open: Arc<Mutex<HashMap<Source, usize>>>,
}

impl PerAddress {
    /// At most `cap` open connections per source address; peers inside `exempt` (the trusted
    /// proxies) are not counted.
    pub fn new(cap: usize, exempt: Vec<ipnet::IpNet>) -> PerAddress {
        PerAddress {
            cap,
            exempt,
            open: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// A place for a new connection from `peer`, or `None` when the peer already holds `cap`
    /// open connections (the caller closes the new one at once).
    pub fn admit(&self, peer: IpAddr) -> Option<Place> {
        if self.exempt.iter().any(|net| net.contains(&peer)) {
            return Some(Place {
                source: None,
                open: self.open.clone(),
            });
        }
        let source = Source::of(peer);
        let mut open = lock(&self.open);
        let count = open.entry(source).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(Place {
            source: Some(source),
            open: self.open.clone(),
        })
    }

    /// Open connections counted for `peer`'s source address (tests and diagnostics).
    pub fn open_from(&self, peer: IpAddr) -> usize {
        lock(&self.open)
            .get(&Source::of(peer))
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let Some(source) = self.source else { return };
        let mut open = lock(&self.open);
        if let Some(count) = open.get_mut(&source) {
            *count -= 1;
            if *count == 0 {
                open.remove(&source);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_address_holds_at_most_the_cap_and_gets_places_back() {
        let limit = PerAddress::new(2, Vec::new());
        let a = limit.admit(ip("192.0.2.1")).expect("first");
        let b = limit.admit(ip("192.0.2.1")).expect("second");
        assert!(limit.admit(ip("192.0.2.1")).is_none(), "third over the cap");
        assert!(
            limit.admit(ip("::ffff:192.0.2.1")).is_none(),
            "the same address mapped into IPv6"
        );
        let other = limit.admit(ip("192.0.2.2")).expect("another address");
        drop(a);
        let c = limit.admit(ip("192.0.2.1")).expect("a place given back");
        drop((b, c, other));
        assert_eq!(limit.open_from(ip("192.0.2.1")), 0);
        assert!(
            lock(&limit.open).is_empty(),
            "closed addresses are forgotten"
        );
    }

    #[test]
    fn ipv6_counts_by_64_and_trusted_proxies_are_not_counted() {
        let limit = PerAddress::new(1, vec!["10.0.0.0/8".parse().unwrap()]);
        let _a = limit.admit(ip("2001:db8:1:2::1")).expect("first");
        assert!(
            limit.admit(ip("2001:db8:1:2:ffff::9")).is_none(),
            "same /64"
        );
        assert!(limit.admit(ip("2001:db8:1:3::1")).is_some(), "another /64");
        let proxies: Vec<_> = (0..10).map(|_| limit.admit(ip("10.1.2.3"))).collect();
        assert!(proxies.iter().all(Option::is_some));
        assert_eq!(limit.open_from(ip("10.1.2.3")), 0);
    }
}
