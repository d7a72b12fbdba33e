import Testing
import TetherTestSupport

@testable import TetherCore
@testable import TetherDNS

struct DNSMessageTests {
    /// A name in wire form.
    static func name(_ text: String) -> [UInt8] {
        text.split(separator: ".").flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } + [0]
    }

    static func u16(_ value: Int) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }

    /// A record: `owner` (bytes, maybe a pointer), type, class IN, TTL 300, `data`.
    static func record(_ owner: [UInt8], type: Int, data: [UInt8]) -> [UInt8] {
        owner + u16(type) + u16(1) + [0, 0, 1, 44] + u16(data.count) + data
    }

    /// A response to `_xmpp-client._tcp.example.com` SRV (question at offset 12, "example.com"
    /// at offset 12 + 18 = 30) with two SRV records whose targets are compressed, a CNAME and
    /// the addresses it leads to.
    static let response: [UInt8] = {
        var bytes: [UInt8] = u16(0x1234) + [0x81, 0x80] + u16(1) + u16(6) + u16(0) + u16(0)
        bytes += name("_xmpp-client._tcp.example.com") + u16(33) + u16(1)
        let question: [UInt8] = [0xC0, 12]
        let example: [UInt8] = [0xC0, 30]
        bytes += record(question, type: 33, data: u16(10) + u16(60) + u16(5222) + [4] + Array("xmpp".utf8) + example)
        bytes += record(question, type: 33, data: u16(20) + u16(0) + u16(5223) + [5] + Array("xmpp2".utf8) + example)
        bytes += record([4] + Array("xmpp".utf8) + example, type: 5, data: name("host.example.net"))
        bytes += record(name("host.example.net"), type: 1, data: [192, 0, 2, 1])
        bytes += record(
            name("host.example.net"),
            type: 28,
            data: [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1]
        )
        bytes += record(name("host.example.net"), type: 16, data: [3] + Array("txt".utf8))  // TXT: skipped
        return bytes
    }()

    static let question = DNSQuestion(name: "_xmpp-client._tcp.example.com", type: .srv)

    @Test func aQueryIsWrittenAsRFC1035Says() throws {
        let bytes = try DNSMessage.query(Self.question, id: 0x1234)
        #expect(
            bytes
                == [0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1] + Self.name("_xmpp-client._tcp.example.com")
                + [0, 33, 0, 1] + [0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0]
        )
        #expect(try DNSMessage.query(DNSQuestion(name: "example.com.", type: .a), id: 1).count == 12 + 13 + 4 + 11)
        for invalid in [
            "", ".", "a..b", String(repeating: "x", count: 64) + ".com", String(repeating: "abcdefg.", count: 32),
        ] {
            expectThrows(\DNSError.kind, .invalidName) {
                try DNSMessage.query(DNSQuestion(name: invalid, type: .a), id: 1)
            }
        }
    }

    @Test func aResponseIsReadWithCompressionAndCNAMEChains() throws {
        let response = try DNSMessage.parse(Self.response, answering: Self.question, id: 0x1234)
        #expect(response.responseCode == .noError && !response.isTruncated)
        #expect(response.answers.count == 5)  // the TXT record skipped
        #expect(
            response.records(for: "_xmpp-client._tcp.EXAMPLE.com.", type: .srv) == [
                .srv(priority: 10, weight: 60, port: 5222, target: "xmpp.example.com"),
                .srv(priority: 20, weight: 0, port: 5223, target: "xmpp2.example.com"),
            ]
        )
        #expect(response.records(for: "xmpp.example.com", type: .a) == [.a([192, 0, 2, 1])])
        #expect(response.records(for: "xmpp.example.com", type: .aaaa).count == 1)
        #expect(response.records(for: "xmpp.example.com", type: .cname) == [.cname("host.example.net")])
        #expect(response.records(for: "xmpp2.example.com", type: .a).isEmpty)
    }

    @Test func everyStrictPrefixIsMalformedUnlessTruncated() throws {
        for length in 0..<Self.response.count {
            expectThrows(\DNSError.kind, .malformed, "prefix \(length)") {
                _ = try DNSMessage.parse(Array(Self.response[..<length]))
            }
        }
        // With TC set, what was whole is kept.
        var truncated = Self.response
        truncated[2] |= 0x02
        let cut = try DNSMessage.parse(Array(truncated[..<(Self.response.count - 40)]))  // inside the AAAA record
        #expect(cut.isTruncated && cut.answers.count == 4)
        // Bytes after the answers (unread sections) change nothing.
        #expect(try DNSMessage.parse(Self.response + [1, 2, 3]) == DNSMessage.parse(Self.response))
    }

    @Test func answersToAnotherQueryAreMismatched() throws {
        #expect(throws: DNSError(.mismatched, "The response has another ID.")) {
            try DNSMessage.parse(Self.response, answering: Self.question, id: 0x4321)
        }
        #expect(throws: DNSError(.mismatched, "The response answers another question.")) {
            try DNSMessage.parse(Self.response, answering: DNSQuestion(name: "example.com", type: .srv), id: 0x1234)
        }
        var query = Self.response
        query[2] &= 0x7F
        #expect(throws: DNSError(.mismatched, "The message is a query, not a response.")) {
            try DNSMessage.parse(query)
        }
    }

    @Test func compressionLoopsAndLimitsFail() throws {
        let header: [UInt8] = Self.u16(1) + [0x81, 0x80] + Self.u16(1) + Self.u16(0) + Self.u16(0) + Self.u16(0)
        // A pointer to itself, and one pointing forward.
        #expect(throws: DNSError(.malformed, "A compression pointer points forward.")) {
            try DNSMessage.parse(header + [0xC0, 12] + Self.u16(1) + Self.u16(1))
        }
        #expect(throws: DNSError(.malformed, "A compression pointer points forward.")) {
            try DNSMessage.parse(header + [0xC0, 14, 0] + Self.u16(1) + Self.u16(1))
        }
        // Answers whose owners each point at the previous owner: the n-th takes n jumps.
        func chained(_ count: Int) -> [UInt8] {
            var bytes = Self.u16(1) + [0x81, 0x80] + Self.u16(1) + Self.u16(count) + Self.u16(0) + Self.u16(0)
            bytes += [1, 0x61, 0] + Self.u16(1) + Self.u16(1)  // the question "a" at 12
            var previous = 12
            for _ in 0..<count {
                let here = bytes.count
                bytes += Self.record([0xC0, UInt8(previous)], type: 1, data: [127, 0, 0, 1])
                previous = here
            }
            return bytes
        }
        let limits = DNSMessage.Limits(maximumPointers: 4)
        #expect(try DNSMessage.parse(chained(4), limits: limits).answers.map(\.name) == ["a", "a", "a", "a"])
        #expect(throws: DNSError(.tooLarge, "A name follows more than 4 pointers.")) {
            try DNSMessage.parse(chained(5), limits: limits)
        }
        // Too many records, and a label with the reserved bits.
        var many = Self.response
        many[7] = 200
        #expect(throws: DNSError(.tooLarge, "The message holds more than 16 records.")) {
            try DNSMessage.parse(many, limits: DNSMessage.Limits(maximumRecords: 16))
        }
        expectThrows(\DNSError.kind, .malformed) {
            try DNSMessage.parse(header + [0x80, 0] + Self.u16(1) + Self.u16(1))
        }
        // A record whose data does not fit its type.
        var bad = Self.response
        let address = try #require(
            (0..<(bad.count - 4)).first { bad[$0..<($0 + 4)].elementsEqual([192, 0, 2, 1]) }
        )
        bad[address - 1] = 3  // the A record's length: 3 bytes
        expectThrows(\DNSError.kind, .malformed) { try DNSMessage.parse(bad) }
    }
}
