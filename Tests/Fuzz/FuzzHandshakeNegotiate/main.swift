// libFuzzer target: the handshake request and response and the negotiate response, as a
// client and a test server read them. The first byte picks which. Invariants: a handshake
// record parses the same from any prefix that holds it, and not at all from a shorter one;
// what parses writes back to a record that parses to the same value; negotiate bodies give an
// outcome or a typed error.
import FuzzSupport
import TetherSignalR

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let selector = input.byte()
    let bytes = input.rest()
    switch selector % 3 {
    case 0:
        checkPrefixes(bytes) { prefix throws(HubProtocolError) in
            try HandshakeRequest.parse(prefix).map { ($0.request, $0.consumed) }
        } write: { request in
            var out: [UInt8] = []
            request.write(into: &out)
            return out
        }
    case 1:
        checkPrefixes(bytes) { prefix throws(HubProtocolError) in
            try HandshakeResponse.parse(prefix).map { ($0.response, $0.consumed) }
        } write: { response in
            var out: [UInt8] = []
            response.write(into: &out)
            return out
        }
    default:
        if case .connect(let response)? = try? Negotiate.parse(bytes) {
            _ = response.connectionToken
        }
    }
    return 0
}

/// `parse` on every prefix ending at or after the record's end gives the whole input's result;
/// one byte shorter gives nil; the written form of the value parses to the same value.
func checkPrefixes<Value: Equatable>(
    _ bytes: [UInt8],
    parse: ([UInt8]) throws(HubProtocolError) -> (Value, Int)?,
    write: (Value) -> [UInt8]
) {
    guard let (value, consumed) = try? parse(bytes) else { return }
    require(consumed > 0 && consumed <= bytes.count, "a handshake record used \(consumed) of \(bytes.count) bytes")
    let exact = try? parse(Array(bytes[..<consumed]))
    require(exact?.0 == value && exact?.1 == consumed, "the record alone parses differently")
    let shorter = Result { () throws(HubProtocolError) in try parse(Array(bytes[..<(consumed - 1)])) }
    if case .success(let early?) = shorter {
        require(false, "a record parsed before its separator arrived (\(early.1) bytes)")
    }
    let written = write(value)
    let reparsed = try? parse(written)
    require(reparsed?.0 == value && reparsed?.1 == written.count, "a written handshake record parses differently")
}
