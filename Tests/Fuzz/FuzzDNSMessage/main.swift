// libFuzzer target: the DNS message reader (RFC 1035 responses: names with compression, A, AAAA,
// CNAME, SRV). The first byte picks small limits. Invariants: no crash or hang; a response read
// holds no more records than the limit; bytes after a complete (untruncated) message change
// nothing; following CNAME chains ends for every name and type.
import FuzzSupport
import TetherCore
import TetherDNS

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let selector = input.byte()
    let limits = DNSMessage.Limits(
        maximumMessageSize: 512 + Int(selector & 0x0F) * 64,
        maximumRecords: 4 + Int(selector >> 4),
        maximumPointers: 1 + Int(selector & 0x07)
    )
    let bytes = input.rest()
    guard let response = try? DNSMessage.parse(bytes, limits: limits) else { return 0 }
    require(response.answers.count <= limits.maximumRecords, "more records than the limit")
    if !response.isTruncated, bytes.count < limits.maximumMessageSize {
        let longer = try? DNSMessage.parse(bytes + [0xC0], limits: limits)
        require(longer == response, "a byte after the message changed what was read")
    }
    for record in response.answers {
        for type in DNSRecordType.allCases {
            _ = response.records(for: record.name, type: type, maximumChain: 4)
        }
    }
    if let question = response.question, let query = try? DNSMessage.query(question, id: response.id) {
        require(query.count >= 12 + 5, "a query shorter than a header and a question")
    }
    return 0
}
