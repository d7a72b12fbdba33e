import Testing
import TetherCore

@testable import TetherHTTP

struct ServerSentEventReaderTests {
    /// Every event of `pieces` read in order, or the error that ended the stream.
    static func read(
        _ pieces: [[UInt8]],
        maximumEventSize: Int = ServerSentEventReader.defaultMaximumEventSize
    ) -> (events: [ServerSentEvent], error: HTTPError?) {
        var reader = ServerSentEventReader(maximumEventSize: maximumEventSize)
        var events: [ServerSentEvent] = []
        for piece in pieces {
            reader.append(piece)
            do {
                while let event = try reader.next() { events.append(event) }
            } catch {
                return (events, error)
            }
        }
        return (events, nil)
    }

    static func read(_ text: String) -> [ServerSentEvent] {
        read([Array(text.utf8)]).events
    }

    static func data(_ text: String) -> [String] {
        read(text).map { String(decoding: $0.data, as: UTF8.self) }
    }

    @Test func dataLinesAreJoinedWithLineFeeds() {
        #expect(Self.data("data: a\r\n\r\n") == ["a"])
        #expect(Self.data("data: first\ndata: second\n\n") == ["first\nsecond"])
        #expect(Self.data("data:no space\n\ndata:  two spaces\n\n") == ["no space", " two spaces"])
        #expect(Self.data("data\n\n") == [""])
        #expect(Self.data("data:\ndata:\n\n") == ["\n"])
    }

    @Test func everyLineEndingEndsALine() {
        #expect(Self.data("data: a\rdata: b\r\rdata: c\r\n\r\ndata: d\n\n") == ["a\nb", "c", "d"])
    }

    @Test func commentsUnknownFieldsAndEventsWithoutDataAreIgnored() {
        #expect(Self.data(":\n\n: keep-alive\n\nfoo: bar\nevent: ping\n\ndata: x\n\n") == ["x"])
        // A comment between data lines does not end the event.
        #expect(Self.data("data: a\n: comment\ndata: b\n\n") == ["a\nb"])
    }

    @Test func eventTypeIdAndRetryAreKept() {
        var reader = ServerSentEventReader()
        reader.append(Array("event: update\nid: 7\nretry: 2500\ndata: x\n\ndata: y\n\nretry: soon\n\n".utf8))
        let first = try? reader.next()
        let second = try? reader.next()
        #expect(first == ServerSentEvent(type: "update", data: Array("x".utf8), lastEventId: "7"))
        #expect(second == ServerSentEvent(type: "message", data: Array("y".utf8), lastEventId: "7"))
        #expect((try? reader.next()) == .some(nil))
        #expect(reader.retry == 2500)
    }

    @Test func aByteOrderMarkIsSkippedOnlyAtTheStart() {
        let mark: [UInt8] = [0xEF, 0xBB, 0xBF]
        let stream = mark + Array("data: a\n\n".utf8) + mark + Array("data: b\n\n".utf8)
        // The second mark is part of a field name that is not `data`: that line is ignored.
        #expect(Self.read([stream]).events.map(\.data) == [Array("a".utf8)])
        // The mark split across reads.
        #expect(Self.read([[0xEF], [0xBB], [0xBF] + Array("data: a\n\n".utf8)]).events.count == 1)
    }

    @Test func anEventTheStreamEndsInsideIsNotDelivered() {
        #expect(Self.data("data: a\n\ndata: b\n").count == 1)
        #expect(Self.data("data: a\n\ndata: b").count == 1)
    }

    /// The same events whichever way the stream is cut: at every byte into two reads, and one
    /// byte a read.
    @Test func aStreamSplitAtEveryByteReadsTheSame() {
        let stream = Array(
            "\u{FEFF}: hello\r\ndata: {\"type\":6}\u{1E}\r\n\r\nevent: x\rid: 1\rdata: a\rdata: b\r\r:\n\ndata: {}\u{1E}{\"type\":1}\u{1E}\n\n"
                .utf8
        )
        let whole = Self.read([stream])
        #expect(whole.error == nil)
        #expect(whole.events.count == 3)
        for cut in 0...stream.count {
            let pieces = [Array(stream[..<cut]), Array(stream[cut...])]
            let split = Self.read(pieces)
            #expect(split.events == whole.events, "cut at \(cut)")
        }
        #expect(Self.read(stream.map { [$0] }).events == whole.events)
    }

    @Test func anEventLargerThanTheLimitFails() {
        let limit = 16
        // A 16-byte line: fits.
        #expect(Self.read([Array("data: 0123456789\n\n".utf8)], maximumEventSize: limit).events.count == 1)
        #expect(
            Self.read([Array("data: 0123456789a\n\n".utf8)], maximumEventSize: limit).error?.kind == .tooLarge
        )
        // The data so far (9 bytes: 8 and the line feed) plus the next line (8) pass it.
        let joined = Self.read([Array("data: 01234567\ndata: 89\n\n".utf8)], maximumEventSize: limit)
        #expect(joined.error?.kind == .tooLarge)
        // A line that never ends fails once it passes the limit, whatever the read sizes.
        let unended = Self.read(Array(repeating: Array("data: xxxxx".utf8), count: 4), maximumEventSize: limit)
        #expect(unended.events.isEmpty)
        #expect(unended.error?.kind == .tooLarge)
        #expect(unended.error?.message == "The Server-Sent Event exceeds the maximum size of 16 bytes.")
        // Keep-alive comments, however many, hold no memory once their line has ended.
        let comments = Self.read(Array(repeating: Array(": keep-alive\n".utf8), count: 1000), maximumEventSize: limit)
        #expect(comments.error == nil)
    }
}
