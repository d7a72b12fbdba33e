import Testing

@testable import TetherCore
@testable import TetherDNS

/// Answers recorded from a real DNS server, dnsmasq 2.89 (Debian 12), for a test zone
/// (`example.test`: two `_xmpp-client._tcp` SRV records, one `_xmpps-client._tcp`, a host with
/// A and AAAA, a CNAME to it, a name that does not exist, and 30 SRV records that do not fit the
/// 1232 bytes the query offers). Each was asked with the exact query `DNSMessage.query` writes
/// (checked below), so these are byte for byte what the resolver reads from this server: no
/// compression of SRV targets (dnsmasq writes them whole), the additional section dnsmasq adds,
/// the OPT record, NXDOMAIN without an authority section, a truncated answer cut at a record.
struct DNSRecordedAnswersTests {
    static func bytes(_ hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            result.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return result
    }

    static let srv = bytes(
        "1a2b858000010002000000030c5f786d70702d636c69656e74045f746370076578616d706c6504746573740000210001"
            + "c00c0021000100000000001a000a0028146605786d707032076578616d706c65047465737400c00c0021000100000000"
            + "001a000a003c146605786d707031076578616d706c65047465737400c06800010001000000000004c000020ac068001c"
            + "000100000000001020010db800000000000000000000001000002904d0000000000000"
    )

    static let srvDirect = bytes(
        "1a2c858000010001000000030d5f786d7070732d636c69656e74045f746370076578616d706c65047465737400002100"
            + "01c00c0021000100000000001a00050000146705786d707031076578616d706c65047465737400c043001c0001000000"
            + "00001020010db8000000000000000000000010c04300010001000000000004c000020a00002904d0000000000000"
    )

    static let cname = bytes(
        "3c4d858000010002000000010463686174076578616d706c6504746573740000010001c00c0005000100000000001405"
            + "786d707031076578616d706c65047465737400c02f00010001000000000004c000020a00002904d0000000000000"
    )

    static let aaaa = bytes(
        "5e6f8580000100010000000105786d707031076578616d706c65047465737400001c0001c00c001c0001000000000010"
            + "20010db800000000000000000000001000002904d0000000000000"
    )

    static let nxdomain = bytes(
        "708181830001000000000001076e6f7768657265076578616d706c650474657374000001000100002904d00000000000" + "00"
    )

    static let big = bytes(
        "92a387800001001e00000001045f626967045f746370076578616d706c6504746573740000210001c00c002100010000"
            + "0000001b0000000013c306686f73743539076578616d706c65047465737400c00c0021000100000000001b0000000013"
            + "c206686f73743538076578616d706c65047465737400c00c0021000100000000001b0000000013c106686f7374353707"
            + "6578616d706c65047465737400c00c0021000100000000001b0000000013c006686f73743536076578616d706c650474"
            + "65737400c00c0021000100000000001b0000000013bf06686f73743535076578616d706c65047465737400c00c002100"
            + "0100000000001b0000000013be06686f73743534076578616d706c65047465737400c00c0021000100000000001b0000"
            + "000013bd06686f73743533076578616d706c65047465737400c00c0021000100000000001b0000000013bc06686f7374"
            + "3532076578616d706c65047465737400c00c0021000100000000001b0000000013bb06686f73743531076578616d706c"
            + "65047465737400c00c0021000100000000001b0000000013ba06686f73743530076578616d706c65047465737400c00c"
            + "0021000100000000001b0000000013b906686f73743439076578616d706c65047465737400c00c002100010000000000"
            + "1b0000000013b806686f73743438076578616d706c65047465737400c00c0021000100000000001b0000000013b70668"
            + "6f73743437076578616d706c65047465737400c00c0021000100000000001b0000000013b606686f7374343607657861"
            + "6d706c65047465737400c00c0021000100000000001b0000000013b506686f73743435076578616d706c650474657374"
            + "00c00c0021000100000000001b0000000013b406686f73743434076578616d706c65047465737400c00c002100010000"
            + "0000001b0000000013b306686f73743433076578616d706c65047465737400c00c0021000100000000001b0000000013"
            + "b206686f73743432076578616d706c65047465737400c00c0021000100000000001b0000000013b106686f7374343107"
            + "6578616d706c65047465737400c00c0021000100000000001b0000000013b006686f73743430076578616d706c650474"
            + "65737400c00c0021000100000000001b0000000013af06686f73743339076578616d706c65047465737400c00c002100"
            + "0100000000001b0000000013ae06686f73743338076578616d706c65047465737400c00c0021000100000000001b0000"
            + "000013ad06686f73743337076578616d706c65047465737400c00c0021000100000000001b0000000013ac06686f7374"
            + "3336076578616d706c65047465737400c00c0021000100000000001b0000000013ab06686f73743335076578616d706c"
            + "65047465737400c00c0021000100000000001b0000000013aa06686f73743334076578616d706c65047465737400c00c"
            + "0021000100000000001b0000000013a906686f73743333076578616d706c65047465737400c00c002100010000000000"
            + "1b0000000013a806686f73743332076578616d706c65047465737400c00c0021000100000000001b0000000013a70668"
            + "6f73743331076578616d706c65047465737400c00c0021000100000000001b0000000013a606686f7374333007657861"
            + "6d706c6504746573740000002904d0000000000000"
    )

    @Test func theQueriesWereOurs() throws {
        // The recorded answers were asked with these IDs; the queries were byte for byte these.
        let query = try DNSMessage.query(DNSQuestion(name: "_xmpp-client._tcp.example.test", type: .srv), id: 0x1A2B)
        #expect(Array(Self.srv.prefix(12 + 32 + 4))[12...] == query[12..<(12 + 32 + 4)])
    }

    @Test func srvRecordsWithTheAdditionalSection() throws {
        let question = DNSQuestion(name: "_xmpp-client._tcp.example.test", type: .srv)
        let response = try DNSMessage.parse(Self.srv, answering: question, id: 0x1A2B)
        #expect(response.responseCode == .noError && response.isAuthoritative && !response.isTruncated)
        #expect(
            Set(response.records(for: question.name, type: .srv)) == [
                .srv(priority: 10, weight: 40, port: 5222, target: "xmpp2.example.test"),
                .srv(priority: 10, weight: 60, port: 5222, target: "xmpp1.example.test"),
            ]
        )
        let direct = try DNSMessage.parse(
            Self.srvDirect,
            answering: DNSQuestion(name: "_xmpps-client._tcp.example.test", type: .srv),
            id: 0x1A2C
        )
        #expect(
            direct.records(for: "_xmpps-client._tcp.example.test", type: .srv) == [
                .srv(priority: 5, weight: 0, port: 5223, target: "xmpp1.example.test")
            ]
        )
    }

    @Test func aCNAMEChainAndAnAAAARecord() throws {
        let cname = try DNSMessage.parse(
            Self.cname,
            answering: DNSQuestion(name: "chat.example.test", type: .a),
            id: 0x3C4D
        )
        #expect(cname.records(for: "chat.example.test", type: .a) == [.a([192, 0, 2, 10])])
        #expect(cname.records(for: "chat.example.test", type: .cname) == [.cname("xmpp1.example.test")])
        let aaaa = try DNSMessage.parse(
            Self.aaaa,
            answering: DNSQuestion(name: "xmpp1.example.test", type: .aaaa),
            id: 0x5E6F
        )
        #expect(
            aaaa.records(for: "XMPP1.example.test.", type: .aaaa) == [
                .aaaa([0x20, 0x01, 0x0D, 0xB8] + Array(repeating: 0, count: 11) + [0x10])
            ]
        )
    }

    @Test func aNameThatDoesNotExist() throws {
        let response = try DNSMessage.parse(
            Self.nxdomain,
            answering: DNSQuestion(name: "nowhere.example.test", type: .a),
            id: 0x7081
        )
        #expect(response.responseCode == .nameError && response.answers.isEmpty)
    }

    /// The answer did not fit: the TC bit, and the records that were whole before the cut; the
    /// resolver machine asks the same server again over TCP.
    @Test func aTruncatedAnswerGoesToTCP() throws {
        let question = DNSQuestion(name: "_big._tcp.example.test", type: .srv)
        let response = try DNSMessage.parse(Self.big, answering: question, id: 0x92A3)
        #expect(response.isTruncated)
        #expect(response.records(for: question.name, type: .srv).count == 30)
        #expect(Self.big.count <= Int(DNSMessage.udpPayloadSize))
        // A recorded answer cut anywhere before the end of its answer section is refused; from
        // there on (the sections after it are not read) it reads as the whole.
        for recorded in [Self.srv, Self.cname, Self.aaaa, Self.nxdomain] {
            let whole = try DNSMessage.parse(recorded)
            let first = try #require(
                (0...recorded.count).first { (try? DNSMessage.parse(Array(recorded.prefix($0)))) != nil }
            )
            #expect(first > 12)
            for length in first...recorded.count {
                #expect(try DNSMessage.parse(Array(recorded.prefix(length))) == whole)
            }
        }
    }
}
