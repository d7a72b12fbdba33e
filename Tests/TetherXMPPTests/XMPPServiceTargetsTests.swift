import Testing
import TetherCore
import TetherDNS
import TetherTestSupport

@testable import TetherXMPP

struct XMPPServiceTargetsTests {
    typealias Targets = XMPPServiceTargets
    typealias Target = XMPPServiceTargets.Target

    static func srv(_ priority: UInt16, _ weight: UInt16, _ port: UInt16, _ target: String) -> DNSRecordData {
        .srv(priority: priority, weight: weight, port: port, target: target)
    }

    static func targets(_ startTLS: Targets.Lookup, _ directTLS: Targets.Lookup, seed: UInt64 = 1) throws -> [Target] {
        var random = SeededRandomNumberGenerator(seed: seed)
        return try Targets.targets(domain: "example.com", startTLS: startTLS, directTLS: directTLS, using: &random)
    }

    @Test func withoutRecordsTheDomainItselfOn5222() throws {
        #expect(try Self.targets(.none, .none) == [Target(host: "example.com", port: 5222, directTLS: false)])
        #expect(try Self.targets(.records([.a([127, 0, 0, 1])]), .none).first?.port == 5222)
        #expect(
            Targets.lookupNames(for: "example.com") == (
                "_xmpp-client._tcp.example.com", "_xmpps-client._tcp.example.com"
            )
        )
    }

    /// A domain that does not exist (NXDOMAIN for its own name) and has no records: no service;
    /// with records its own name does not matter.
    @Test func aDomainThatDoesNotExistHasNoService() throws {
        var random = SeededRandomNumberGenerator(seed: 1)
        expectThrows(
            \Targets.NoService.message,
            "example.com offers no XMPP service: the domain does not exist (NXDOMAIN), and neither _xmpp-client._tcp.example.com nor _xmpps-client._tcp.example.com has SRV records."
        ) {
            try Targets.targets(
                domain: "example.com",
                startTLS: .none,
                directTLS: .none,
                domainExists: false,
                using: &random
            )
        }
        let targets = try Targets.targets(
            domain: "example.com",
            startTLS: .records([Self.srv(0, 0, 5222, "xmpp.example.net")]),
            directTLS: .none,
            domainExists: false,
            using: &random
        )
        #expect(targets == [Target(host: "xmpp.example.net", port: 5222, directTLS: false)])
    }

    @Test func bothKindsAreMixedByPriority() throws {
        let targets = try Self.targets(
            .records([Self.srv(10, 0, 5222, "xmpp.example.com."), Self.srv(30, 0, 5222, "backup.example.net")]),
            .records([Self.srv(5, 0, 443, "tls.example.com"), Self.srv(20, 0, 5223, "tls2.example.com")])
        )
        #expect(
            targets == [
                Target(host: "tls.example.com", port: 443, directTLS: true),
                Target(host: "xmpp.example.com", port: 5222, directTLS: false),
                Target(host: "tls2.example.com", port: 5223, directTLS: true),
                Target(host: "backup.example.net", port: 5222, directTLS: false),
            ]
        )
    }

    @Test func aDotTargetMeansNoServiceOfThatKind() throws {
        // No direct TLS: the STARTTLS records.
        #expect(
            try Self.targets(.records([Self.srv(0, 0, 5222, "xmpp.example.com")]), .records([Self.srv(0, 0, 0, ".")]))
                == [Target(host: "xmpp.example.com", port: 5222, directTLS: false)]
        )
        // No service at all: no fallback to the domain.
        for (plain, secure) in [
            (Targets.Lookup.records([Self.srv(0, 0, 0, ".")]), Targets.Lookup.none),
            (.none, .records([Self.srv(0, 0, 0, ".")])),
            (.records([Self.srv(0, 0, 0, ".")]), .records([Self.srv(0, 0, 0, ".")])),
        ] {
            expectThrows(
                \Targets.NoService.message,
                "example.com offers no XMPP service: its SRV records (_xmpp-client._tcp.example.com, _xmpps-client._tcp.example.com) name the target '.'."
            ) { try Self.targets(plain, secure) }
        }
    }

    /// Within a priority, RFC 2782's draw: a number from 0 to the sum of the weights (inclusive),
    /// the first record whose running sum reaches it (weight 0 records first): here 0 picks the
    /// weight 0 record, 1 the weight 1 record, 2 to 4 the weight 3 record. Seeded, the order
    /// repeats.
    @Test func weightsShareTheFirstPlace() throws {
        let records = Targets.Lookup.records([
            Self.srv(1, 0, 5222, "zero.example.com"), Self.srv(1, 1, 5222, "one.example.com"),
            Self.srv(1, 3, 5222, "three.example.com"),
        ])
        var first: [String: Int] = [:]
        let draws = 8000
        for seed in 0..<UInt64(draws) {
            let order = try Self.targets(records, .none, seed: seed)
            #expect(Set(order.map(\.host)).count == 3)
            first[order[0].host, default: 0] += 1
        }
        let three = Double(first["three.example.com", default: 0]) / Double(draws)
        let one = Double(first["one.example.com", default: 0]) / Double(draws)
        let zero = Double(first["zero.example.com", default: 0]) / Double(draws)
        #expect(abs(three - 0.6) < 0.03 && abs(one - 0.2) < 0.03 && abs(zero - 0.2) < 0.03, "\(first)")
        #expect(try Self.targets(records, .none, seed: 42) == Self.targets(records, .none, seed: 42))
    }
}

/// The machine connecting through the lookup: a direct-TLS target is opened with TLS from the
/// first byte for the JID's domain (never the target's name) and its stream counts as secured;
/// a target that fails is followed by the next within the same attempt.
struct ServiceLookupMachineTests {
    @Test func aDirectTLSTargetIsSecuredFromTheFirstByte() {
        let harness = XMPPClientHarness {
            $0.serviceLookup = true
            $0.tls = .required
        }
        harness.start()
        #expect(harness.transcript == ["lookup"])
        harness.machine.serviceLookedUp(
            startTLS: .records([.srv(priority: 10, weight: 0, port: 5222, target: "xmpp.example.net")]),
            directTLS: .records([.srv(priority: 5, weight: 0, port: 443, target: "tls.example.net.")]),
            generation: harness.generation!,
            now: harness.now
        )
        harness.drain()
        #expect(harness.endpoints == [Endpoint(host: "tls.example.net", port: 443)])
        #expect(harness.directTLSNames == ["example.com"])
        // It fails: the next target, STARTTLS this time, checked for the domain too.
        harness.transportClosed()
        #expect(harness.endpoints.last == Endpoint(host: "xmpp.example.net", port: 5222))
        #expect(harness.directTLSNames.last == .some(nil))
        #expect(harness.state == .connectingTransport)
    }

    @Test func withDirectTLSRequiredOnlyDirectTLSTargetsOrTheDomainOn5223() {
        let harness = XMPPClientHarness {
            $0.serviceLookup = true
            $0.tls = .direct
        }
        harness.start()
        harness.machine.serviceLookedUp(
            startTLS: .records([.srv(priority: 10, weight: 0, port: 5222, target: "xmpp.example.net")]),
            directTLS: .none,
            generation: harness.generation!,
            now: harness.now
        )
        harness.drain()
        #expect(harness.endpoints == [Endpoint(host: "example.com", port: 5223)])
        #expect(harness.directTLSNames == ["example.com"])
    }
}
