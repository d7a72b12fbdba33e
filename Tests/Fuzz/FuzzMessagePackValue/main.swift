// libFuzzer target: MessagePack values. Invariants: skipping a value and reading it agree (both
// fail, or both end at the same byte, or only reading fails, on invalid UTF-8 or an invalid
// timestamp, which skipping does not check); what is read writes back to bytes that read and write
// to the very same bytes (encode(decode(x)) is stable); a valid value decodes by the fast path
// and by Codable alike, and renders as JSON or fails with a typed error.
import FuzzSupport
import TetherMessagePack
import TetherSignalR

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = FuzzInput(data, size).bytes
    var skipper = MessagePackReader(bytes, maximumDepth: 16)
    var reader = MessagePackReader(bytes, maximumDepth: 16)
    let skipped = Result { () throws(MessagePackError) in try skipper.skipValue() }
    let value = Result { () throws(MessagePackError) in try reader.readValue() }
    switch (skipped, value) {
    case (.success, .success(let value)):
        require(skipper.position == reader.position, "skipValue and readValue end at different bytes")
        var writer = MessagePackWriter()
        writer.write(value)
        var again = MessagePackReader(writer.bytes, maximumDepth: 17)
        guard let reread = try? again.readValue() else {
            fatalError("invariant broken: a written value does not read back")
        }
        require(again.position == writer.bytes.count, "a written value reads back shorter")
        var rewriter = MessagePackWriter()
        rewriter.write(reread)
        require(rewriter.bytes == writer.bytes, "writing a read value is not stable")
        var json: [UInt8] = []
        _ = try? CanonicalJSON.appendMessagePack(value, to: &json)
    case (.failure, .failure): break
    case (.success, .failure(let error)):
        // Skipping checks structure only; strings' UTF-8 and timestamps' fields are checked when
        // they are read.
        require(
            error.kind == .invalidUTF8 || error.kind == .invalidTimestamp,
            "skipValue accepted what readValue refused: \(error)"
        )
    case (.failure(let error), .success):
        fatalError("invariant broken: readValue accepted what skipValue refused: \(error)")
    }
    if let encoded = try? EncodedValue(messagePack: bytes, maximumDepth: 16) {
        _ = try? encoded.decode([String: Int].self)
        _ = try? encoded.decode([Double].self)
        _ = try? CanonicalJSON.render(encoded)
        agree(encoded)
    }
    return 0
}
