//! The client address of a request that may have come through reverse proxies
//! (`GATEHOUSE_TRUSTED_PROXIES`; issue "Credentials beyond the browser", bullet 6).
//!
//! `X-Forwarded-For` is a list each proxy appends its peer to, so only the entries added by
//! proxies we trust can be believed: walking from the right, every entry that is itself a
//! trusted proxy is skipped and the first one that is not is the client. Entries further left
//! were written by the client and are never used. From a peer that is not a trusted proxy the
//! header is ignored entirely.

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

/// Whether `addr` is one of `trusted` (IPv4-mapped IPv6 compared as IPv4).
fn is_trusted(trusted: &[IpNet], addr: IpAddr) -> bool {
    let addr = addr.to_canonical();
    trusted.iter().any(|net| net.contains(&addr))
}

/// One `X-Forwarded-For` entry: an address, optionally with a port (`1.2.3.4:5`,
/// `[2001:db8::1]:5`). `None` for anything else (`unknown`, obfuscated identifiers).
fn parse_entry(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            entry
                .strip_prefix('[')
                .and_then(|e| e.strip_suffix(']'))
                .and_then(|e| e.parse().ok())
        })
}

/// The client address of a request from TCP peer `peer` whose `X-Forwarded-For` header lines
/// are `forwarded_for` (in the order received): the peer itself unless it is one of
/// `trusted`; otherwise the rightmost entry that is not a trusted proxy. When the walk meets
/// an entry that is not an address, or every entry is a trusted proxy, the last trusted hop
/// seen is the answer (the nearest address known for sure). Always canonical (`::ffff:a.b.c.d`
/// becomes `a.b.c.d`).
pub fn client_address<'a>(
    peer: IpAddr,
    forwarded_for: impl IntoIterator<Item = &'a str>,
    trusted: &[IpNet],
) -> IpAddr {
    let mut client = peer.to_canonical();
    if !is_trusted(trusted, client) {
        return client;
    }
    let entries: Vec<&str> = forwarded_for
        .into_iter()
        .flat_map(|line| line.split(','))
        .collect();
    for entry in entries.into_iter().rev() {
        let Some(addr) = parse_entry(entry) else {
            return client;
        };
        client = addr.to_canonical();
        if !is_trusted(trusted, client) {
            return client;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_header_counts_only_from_a_trusted_peer() {
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(
            client_address(ip("192.0.2.1"), ["203.0.113.7"], &trusted),
            ip("192.0.2.1")
        );
        assert_eq!(
            client_address(ip("10.0.0.1"), ["203.0.113.7"], &trusted),
            ip("203.0.113.7")
        );
        assert_eq!(
            client_address(ip("10.0.0.1"), ["203.0.113.7"], &[]),
            ip("10.0.0.1")
        );
        // No header: the proxy itself.
        assert_eq!(client_address(ip("10.0.0.1"), [], &trusted), ip("10.0.0.1"));
    }

    #[test]
    fn the_rightmost_untrusted_entry_wins() {
        let trusted = nets(&["10.0.0.0/8"]);
        let peer = ip("10.0.0.1");
        assert_eq!(
            client_address(peer, ["198.51.100.1, 203.0.113.7, 10.9.9.9"], &trusted),
            ip("203.0.113.7")
        );
        // Several header lines are one list, in order.
        assert_eq!(
            client_address(peer, ["198.51.100.1", "203.0.113.7,10.9.9.9"], &trusted),
            ip("203.0.113.7")
        );
        // All trusted: the leftmost (furthest) hop.
        assert_eq!(
            client_address(peer, ["10.1.1.1, 10.2.2.2"], &trusted),
            ip("10.1.1.1")
        );
        // Garbage stops the walk at the last trusted hop.
        assert_eq!(
            client_address(peer, ["203.0.113.7, unknown, 10.2.2.2"], &trusted),
            ip("10.2.2.2")
        );
        assert_eq!(client_address(peer, [""], &trusted), peer);
        // Ports and brackets, IPv4-mapped addresses.
        assert_eq!(
            client_address(peer, ["203.0.113.7:4711"], &trusted),
            ip("203.0.113.7")
        );
        assert_eq!(
            client_address(peer, ["[2001:db8::1]:443"], &trusted),
            ip("2001:db8::1")
        );
        assert_eq!(
            client_address(peer, ["[2001:db8::1]"], &trusted),
            ip("2001:db8::1")
        );
        assert_eq!(
            client_address(ip("::ffff:10.0.0.1"), ["::ffff:203.0.113.7"], &trusted),
            ip("203.0.113.7")
        );
    }
}
