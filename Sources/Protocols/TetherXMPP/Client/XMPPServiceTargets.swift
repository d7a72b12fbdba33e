import TetherCore
public import TetherDNS

/// Where an XMPP client connects, found in DNS: RFC 6120 §3.2's `_xmpp-client._tcp` SRV records
/// (STARTTLS) and XEP-0368's `_xmpps-client._tcp` records (direct TLS), ordered as RFC 2782 says,
/// or the domain itself on port 5222 when it publishes neither (`Specs/dns.md`, "Connection
/// targets").
public enum XMPPServiceTargets {
    /// One place to try: a host (resolved to addresses next) and port, with TLS from the first
    /// byte or not. The certificate is checked against the JID's domain whatever `host` is.
    public struct Target: Hashable, Sendable, CustomStringConvertible {
        /// The host to connect to.
        public var host: String
        /// The port.
        public var port: Int
        /// Whether TLS starts with the first byte (XEP-0368 `_xmpps-client`).
        public var directTLS: Bool

        /// A target at `host`:`port`, with direct TLS or STARTTLS.
        public init(host: String, port: Int, directTLS: Bool) {
            self.host = host
            self.port = port
            self.directTLS = directTLS
        }

        public var description: String { "\(host):\(port)\(directTLS ? " (direct TLS)" : "")" }
    }

    /// What one SRV lookup found.
    public enum Lookup: Hashable, Sendable {
        /// No such name, or no SRV records at it.
        case none
        /// The records (SRV data; other kinds are ignored).
        case records([DNSRecordData])
    }

    /// Why a domain has no XMPP service.
    public struct NoService: Error, Hashable, Sendable, CustomStringConvertible {
        /// What the lookup found, readable.
        public let message: String
        public var description: String { message }
    }

    /// The SRV names to look up for `domain`: STARTTLS first, then direct TLS.
    public static func lookupNames(for domain: String) -> (startTLS: String, directTLS: String) {
        ("_xmpp-client._tcp.\(domain)", "_xmpps-client._tcp.\(domain)")
    }

    /// The targets to try in order, from the two lookups' answers:
    /// - both record sets mixed into one list and ordered by RFC 2782 (lowest priority first;
    ///   within a priority a weighted random order, weight 0 records first in the draw), as
    ///   XEP-0368 says, so the operator decides between STARTTLS and direct TLS;
    /// - a set that is a single `.` target says "no service" for its kind: a direct-TLS `.`
    ///   leaves the STARTTLS records; a STARTTLS `.` with no direct-TLS records (or a `.` there
    ///   too) means the domain offers no XMPP service;
    /// - no records of either kind: the domain itself on 5222 (RFC 6120 §3.2.2), unless the
    ///   domain's own name does not exist (`domainExists` false: NXDOMAIN for it), which means
    ///   no service.
    public static func targets(
        domain: String,
        startTLS: Lookup,
        directTLS: Lookup,
        domainExists: Bool = true,
        using random: inout some RandomNumberGenerator
    ) throws(NoService) -> [Target] {
        let plain = records(startTLS, directTLS: false)
        let secure = records(directTLS, directTLS: true)
        if plain == nil && secure == nil {
            guard domainExists else {
                let names = lookupNames(for: domain)
                throw NoService(
                    message: "\(domain) offers no XMPP service: the domain does not exist (NXDOMAIN), "
                        + "and neither \(names.startTLS) nor \(names.directTLS) has SRV records."
                )
            }
            return [Target(host: domain, port: 5222, directTLS: false)]
        }
        let usable = (plain ?? []) + (secure ?? [])
        let named = usable.filter { $0.target != "." }
        guard !named.isEmpty else {
            let names = lookupNames(for: domain)
            throw NoService(
                message: "\(domain) offers no XMPP service: its SRV records (\(names.startTLS), \(names.directTLS)) "
                    + "name the target '.'."
            )
        }
        return ordered(named, using: &random).map {
            Target(host: $0.target, port: Int($0.port), directTLS: $0.directTLS)
        }
    }

    struct Record: Hashable {
        var priority: UInt16
        var weight: UInt16
        var port: UInt16
        var target: String
        var directTLS: Bool
    }

    /// The SRV records of a lookup (nil: none).
    static func records(_ lookup: Lookup, directTLS: Bool) -> [Record]? {
        guard case .records(let data) = lookup else { return nil }
        let records = data.compactMap { data -> Record? in
            guard case .srv(let priority, let weight, let port, let target) = data else { return nil }
            let trimmed = target.hasSuffix(".") && target != "." ? String(target.dropLast()) : target
            return Record(priority: priority, weight: weight, port: port, target: trimmed, directTLS: directTLS)
        }
        return records.isEmpty ? nil : records
    }

    /// RFC 2782's order: by priority; within one, repeatedly draw a record with probability
    /// proportional to its weight (weight 0 records placed first, so they are drawn only when
    /// the draw is 0 or nothing else is left).
    static func ordered(_ records: [Record], using random: inout some RandomNumberGenerator) -> [Record] {
        var result: [Record] = []
        let priorities = Set(records.map(\.priority)).sorted()
        for priority in priorities {
            // Weight 0 first, then the rest in their given order (the RFC allows any order).
            var group =
                records.filter { $0.priority == priority && $0.weight == 0 }
                + records.filter { $0.priority == priority && $0.weight > 0 }
            while !group.isEmpty {
                let total = group.reduce(0) { $0 + Int($1.weight) }
                let draw = Int.random(in: 0...total, using: &random)
                var running = 0
                let index =
                    group.firstIndex { record in
                        running += Int(record.weight)
                        return running >= draw
                    } ?? group.count - 1
                result.append(group.remove(at: index))
            }
        }
        return result
    }
}
