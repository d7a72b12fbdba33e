@_spi(TetherInternal) public import TetherCore
@_spi(TetherInternal) import TetherText

/// One event of a `text/event-stream` (WHATWG HTML, "Server-sent events", the event stream
/// interpretation): what its `data` lines carried, joined with line feeds.
public struct ServerSentEvent: Hashable, Sendable {
    /// The event type: the last `event` field's value, or `message` when it had none.
    public var type: String
    /// The `data` fields' values joined with a line feed (0x0A) between them, as bytes.
    public var data: [UInt8]
    /// The last event id the stream set (an `id` field in this event or an earlier one).
    public var lastEventId: String

    /// Creates an event.
    public init(type: String = "message", data: [UInt8], lastEventId: String = "") {
        self.type = type
        self.data = data
        self.lastEventId = lastEventId
    }
}

/// Reads a `text/event-stream` body as it arrives, in any pieces: lines end with CR LF, LF or a
/// lone CR (a CR LF split between two reads is one line end); an empty line ends an event;
/// `data` lines are joined with line feeds; comments (`:` lines, which servers and proxies send
/// to keep the stream open) and unknown fields are ignored; a byte order mark at the start is
/// skipped; an event with no `data` is not an event; an event the stream ends inside is dropped.
/// `id` and `retry` are kept as the standard says (`lastEventId`, `retry`).
///
/// A message transport over Server-Sent Events (SignalR's, for one) carries its text messages in
/// `data` (one or more messages an event); the reader hands the bytes over unchanged, so the
/// protocol's parser sees exactly what the server wrote.
///
/// Memory is bounded by `maximumEventSize`: the data of the event being read plus the line being
/// read (ended or not, whatever its field) may not exceed it, or `next()` throws `tooLarge` (the
/// stream cannot be read on from there, so the transport closes).
public struct ServerSentEventReader: Sendable {
    /// The default bound on one event's data plus the unfinished line: 1 MiB.
    public static let defaultMaximumEventSize = 1 << 20

    /// The bound on one event's data plus the line being read.
    public let maximumEventSize: Int
    /// The `retry` field's last value (the reconnection time in milliseconds the server asks
    /// for), if the stream sent one.
    public private(set) var retry: Int?

    private var buffer: [UInt8] = []
    private var start = 0
    /// The previous piece ended with a CR: a LF first in the next one belongs to that line end.
    private var skipsLineFeed = false
    /// Nothing of the stream has been read yet (a byte order mark may come first).
    private var atStreamStart = true
    private var data: [UInt8] = []
    private var type = ""
    private var lastEventId = ""

    /// A reader for a stream whose events (data plus unfinished line) stay within
    /// `maximumEventSize` bytes.
    public init(maximumEventSize: Int = ServerSentEventReader.defaultMaximumEventSize) {
        precondition(maximumEventSize > 0, "maximumEventSize must be positive")
        self.maximumEventSize = maximumEventSize
    }

    /// Adds bytes received from the stream.
    public mutating func append(_ bytes: Span<UInt8>) {
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(copying: bytes)
    }

    /// Adds bytes received from the stream.
    public mutating func append(_ bytes: [UInt8]) {
        append(bytes.backDeployedSpan)
    }

    /// The next complete event, or nil until more bytes arrive.
    public mutating func next() throws(HTTPError) -> ServerSentEvent? {
        while true {
            if skipsLineFeed {
                guard start < buffer.count else { return nil }
                skipsLineFeed = false
                if buffer[start] == Self.lineFeed { start += 1 }
            }
            if atStreamStart {
                guard skipByteOrderMark() else { return nil }
            }
            guard let end = lineEnd() else {
                try checkSize(line: buffer.count - start)
                compact()
                return nil
            }
            let lineStart = start
            start = end + 1
            if buffer[end] == Self.carriageReturn {
                if start < buffer.count {
                    if buffer[start] == Self.lineFeed { start += 1 }
                } else {
                    skipsLineFeed = true
                }
            }
            if lineStart == end {
                if let event = dispatch() { return event }
                continue
            }
            // Every line counts, whatever its field: so a line is refused alike whether it came
            // whole or in pieces.
            try checkSize(line: end - lineStart)
            try process(lineStart..<end)
        }
    }

    static let lineFeed = UInt8(ascii: "\n")
    static let carriageReturn = UInt8(ascii: "\r")
    static let colon = UInt8(ascii: ":")
    static let space = UInt8(ascii: " ")

    /// Skips a leading UTF-8 byte order mark; false while too few bytes have come to tell.
    private mutating func skipByteOrderMark() -> Bool {
        let mark: [UInt8] = [0xEF, 0xBB, 0xBF]
        var index = 0
        while index < 3, start + index < buffer.count {
            guard buffer[start + index] == mark[index] else {
                atStreamStart = false
                return true
            }
            index += 1
        }
        guard index == 3 else { return false }
        start += 3
        atStreamStart = false
        return true
    }

    /// The index of the CR or LF that ends the line at `start`, if it has come.
    private func lineEnd() -> Int? {
        let span = buffer.backDeployedSpan
        let lineFeed = ByteScanning.firstIndex(of: Self.lineFeed, in: span, from: start, to: buffer.count)
        let limit = lineFeed ?? buffer.count
        return ByteScanning.firstIndex(of: Self.carriageReturn, in: span, from: start, to: limit) ?? lineFeed
    }

    private mutating func process(_ line: Range<Int>) throws(HTTPError) {
        let colon = buffer[line].firstIndex(of: Self.colon)
        if colon == line.lowerBound { return }  // a comment
        let nameEnd = colon ?? line.upperBound
        var valueStart = colon.map { $0 + 1 } ?? line.upperBound
        if valueStart < line.upperBound, buffer[valueStart] == Self.space { valueStart += 1 }
        let name = buffer[line.lowerBound..<nameEnd]
        let value = buffer[valueStart..<line.upperBound]
        if name.elementsEqual("data".utf8) {
            data.append(contentsOf: value)
            data.append(Self.lineFeed)
            try checkSize(line: 0)
        } else if name.elementsEqual("event".utf8) {
            type = String(decoding: value, as: UTF8.self)
        } else if name.elementsEqual("id".utf8) {
            if !value.contains(0) { lastEventId = String(decoding: value, as: UTF8.self) }
        } else if name.elementsEqual("retry".utf8) {
            if !value.isEmpty, value.count <= 18, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                retry = value.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            }
        }
    }

    /// Ends the event at an empty line: returns it if it had data, and starts the next one.
    private mutating func dispatch() -> ServerSentEvent? {
        defer { type = "" }
        guard !data.isEmpty else { return nil }
        data.removeLast()
        var event = ServerSentEvent(type: type.isEmpty ? "message" : type, data: [], lastEventId: lastEventId)
        swap(&event.data, &data)
        return event
    }

    private func checkSize(line: Int) throws(HTTPError) {
        guard data.count + line > maximumEventSize else { return }
        throw HTTPError(
            .tooLarge,
            "The Server-Sent Event exceeds the maximum size of \(maximumEventSize) bytes."
        )
    }

    /// Drops the lines already read, so the buffer holds only the unfinished one.
    private mutating func compact() {
        guard start > 0 else { return }
        buffer.removeSubrange(0..<start)
        start = 0
    }
}
