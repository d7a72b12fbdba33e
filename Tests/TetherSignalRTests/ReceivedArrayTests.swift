import Testing
import TetherCore
import TetherTestSupport

@testable import TetherSignalR

/// Received arrays appended as they are (`HubMessageParser.append(_: [UInt8])`): the parsers keep
/// the array instead of copying it when nothing is pending, and copy only the bytes that complete
/// a pending message otherwise. Whatever the split and the mix of appends, the messages and the
/// errors are those of the same bytes fed whole.
struct ReceivedArrayTests {
    /// How one test feeds its stream: arrays of random sizes (1 byte up to a few messages), some
    /// appended as spans instead, and sometimes two or three appends before the parser is asked
    /// for messages (so that the pending bytes may hold whole messages).
    struct Schedule {
        var seed: UInt64
        var maximumChunk: Int

        func feed<P: HubMessageParser>(
            _ parser: P,
            _ stream: [UInt8]
        ) -> (
            messages: [HubMessage], error: HubProtocolError?, partial: Bool
        ) {
            var parser = parser
            var rng = SeededRandomNumberGenerator(seed: seed)
            var messages: [HubMessage] = []
            var start = 0
            while start < stream.count {
                let end = min(start + Int.random(in: 1...maximumChunk, using: &rng), stream.count)
                let chunk = Array(stream[start..<end])
                if Int.random(in: 0..<5, using: &rng) == 0 {
                    parser.append(chunk.backDeployedSpan)
                } else {
                    parser.append(chunk)
                }
                start = end
                if start < stream.count && Int.random(in: 0..<3, using: &rng) == 0 { continue }
                do {
                    while let message = try parser.next() { messages.append(message) }
                } catch {
                    return (messages, error, false)
                }
            }
            return (messages, nil, parser.hasPartialMessage)
        }
    }

    static func stream<P: HubProtocol>(_ hubProtocol: P, seed: UInt64) throws -> [UInt8] {
        var rng = SeededRandomNumberGenerator(seed: seed)
        var stream: [UInt8] = []
        for _ in 0..<120 {
            hubProtocol.write(
                try HubProtocolPropertyTests.randomMessage(&rng, hubProtocol.valueEncoding),
                into: &stream
            )
        }
        return stream
    }

    func check<P: HubProtocol>(_ hubProtocol: P, _ any: AnyHubProtocol) throws {
        for seed in 1...4 as ClosedRange<UInt64> {
            let stream = try Self.stream(hubProtocol, seed: seed)
            let whole = decodeAll(hubProtocol.makeParser(), stream, .whole)
            #expect(whole.error == nil)
            for maximumChunk in [1, 7, 64, 400, 5000] {
                let schedule = Schedule(seed: seed &* 31 &+ UInt64(maximumChunk), maximumChunk: maximumChunk)
                let fed = schedule.feed(hubProtocol.makeParser(), stream)
                let same = fed.messages == whole.messages
                #expect(same, "seed \(seed), chunks up to \(maximumChunk)")
                #expect(fed.error == nil && !fed.partial)
                let sameThroughAny = schedule.feed(any.makeParser(), stream).messages == whole.messages
                #expect(sameThroughAny, "seed \(seed), chunks up to \(maximumChunk)")
                // Cut short: the same messages up to the cut, and a partial one pending.
                let cut = Array(stream[..<(stream.count * 2 / 3)])
                let wholeCut = decodeAll(hubProtocol.makeParser(), cut, .whole)
                let fedCut = Schedule(seed: seed, maximumChunk: maximumChunk).feed(hubProtocol.makeParser(), cut)
                let sameCut = fedCut.messages == wholeCut.messages
                #expect(sameCut && fedCut.partial == wholeCut.partial)
            }
            // Damaged streams fail where the same bytes fed whole fail, with the same error.
            var rng = SeededRandomNumberGenerator(seed: seed)
            for _ in 0..<40 {
                var damaged = stream
                damaged[Int.random(in: 0..<damaged.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                let expected = decodeAll(hubProtocol.makeParser(), damaged, .whole)
                for maximumChunk in [3, 300] {
                    let fed = Schedule(seed: seed, maximumChunk: maximumChunk).feed(hubProtocol.makeParser(), damaged)
                    #expect(fed.error == expected.error)
                    let same = fed.messages == expected.messages
                    #expect(same)
                    #expect(fed.partial == expected.partial)
                }
            }
        }
    }

    @Test func jsonMessagesAreTheSameWhateverTheArrays() throws {
        try check(JSONHubProtocol(), .json(JSONHubProtocol()))
    }

    @Test func messagePackMessagesAreTheSameWhateverTheArrays() throws {
        try check(MessagePackHubProtocol(), .messagePack(MessagePackHubProtocol()))
    }

    static func address(_ array: [UInt8]) -> UnsafeRawPointer? {
        array.withUnsafeBytes { $0.baseAddress }
    }

    /// The array itself is kept when nothing is pending; with a pending record, only the bytes up
    /// to its end are copied and the array is queued behind them (then taken up as it is).
    @Test func theArrayIsKeptNotCopied() throws {
        let record = Array(#"{"type":1,"target":"T","arguments":["a"]}"#.utf8) + [0x1E]
        var parser = JSONHubProtocol().makeParser()
        let first = record + record[..<10]
        parser.append(first)
        #expect(Self.address(parser.buffer.storage) == Self.address(first))
        #expect(try parser.next() != nil)
        #expect(try parser.next() == nil)
        let second = Array(record[10...]) + record
        parser.append(second)
        #expect(parser.buffer.storage == record)
        #expect(Self.address(parser.buffer.queued) == Self.address(second))
        guard case .invocation(let invocation)? = try parser.next() else {
            Issue.record("no invocation")
            return
        }
        #expect(try invocation.arguments.decode(String.self, at: 0) == "a")
        #expect(try parser.next() != nil)
        #expect(Self.address(parser.buffer.storage) == Self.address(second))
        #expect(try parser.next() == nil && !parser.hasPartialMessage)

        // MessagePack: the same, the pending message's end read from its length prefix.
        var stream: [UInt8] = []
        let messagePack = MessagePackHubProtocol()
        for _ in 0..<3 { messagePack.write(.ping, into: &stream) }
        let frame = stream.count / 3
        var packed = messagePack.makeParser()
        let head = Array(stream[..<(frame + 1)])
        packed.append(head)
        #expect(Self.address(packed.buffer.storage) == Self.address(head))
        #expect(try packed.next() == .ping && packed.next() == nil)
        let tail = Array(stream[(frame + 1)...])
        packed.append(tail)
        #expect(packed.buffer.storage == Array(stream[frame..<(2 * frame)]))
        #expect(Self.address(packed.buffer.queued) == Self.address(tail))
        #expect(try packed.next() == .ping && packed.next() == .ping && packed.next() == nil)
    }

    /// Arrays that never complete a record are bounded by the size limit, as spans are.
    @Test func arraysThatNeverEndARecordCannotGrowMemory() {
        var parser = JSONHubProtocol(maximumMessageSize: 100_000).makeParser()
        var failed = false
        for _ in 0..<64 {
            parser.append([UInt8](repeating: UInt8(ascii: "a"), count: 4096))
            do {
                _ = try parser.next()
            } catch {
                #expect(error.kind == .messageTooLarge)
                failed = true
                break
            }
            #expect(parser.buffer.pendingCount <= 100_000 + 4096)
        }
        #expect(failed)

        // A MessagePack prefix over the limit fails, also when an array completes its message.
        var packed = MessagePackHubProtocol(maximumMessageSize: 1000).makeParser()
        packed.append(VarInt.encode(1001) + [0x91])
        packed.append([UInt8](repeating: 0xC0, count: 2000))
        #expect(packed.buffer.storage.count == 1001 + VarInt.encode(1001).count)
        expectThrows(\HubProtocolError.kind, .messageTooLarge) { try packed.next() }
        #expect(!packed.hasPartialMessage)
    }
}
