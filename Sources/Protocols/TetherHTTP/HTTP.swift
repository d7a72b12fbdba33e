@_spi(TetherInternal) public import TetherCore

/// Why an HTTP response cannot be read.
public typealias HTTPError = TetherError<HTTPErrorKind>

/// What kind of failure to read an HTTP response (`HTTPError`).
public enum HTTPErrorKind: String, ErrorKind {
    /// Not HTTP/1.x as RFC 9112 writes it (a bad status line, header line, chunk size).
    case malformed
    /// A configured limit was exceeded (head size, header count, body size).
    case tooLarge
    /// The input ended inside the response.
    case incomplete
}

/// HTTP header fields in order, names compared case-insensitively (RFC 9110 §5.1).
public struct HTTPHeaders: Hashable, Sendable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields, in order.
    public private(set) var fields: [(name: String, value: String)]

    /// Headers with these fields.
    public init(_ fields: [(name: String, value: String)] = []) {
        self.fields = fields
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// Appends a field.
    public mutating func add(_ name: String, _ value: String) {
        fields.append((name, value))
    }

    /// Every value of the field `name`.
    public func values(_ name: String) -> [String] {
        fields.filter { Self.equal($0.name, name) }.map(\.value)
    }

    /// The first value of the field `name`.
    public subscript(_ name: String) -> String? {
        fields.first { Self.equal($0.name, name) }?.value
    }

    /// Whether the comma-separated list field `name` holds `token` (case-insensitive), as
    /// `Connection: keep-alive, Upgrade` holds `upgrade`.
    public func contains(_ name: String, token: String) -> Bool {
        values(name).contains { value in
            value.split(separator: ",").contains { Self.equal($0.trimmingSpaces, token) }
        }
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    static func equal(_ a: some StringProtocol, _ b: some StringProtocol) -> Bool {
        a.utf8.count == b.utf8.count && a.lowercased() == b.lowercased()
    }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for field in fields {
            hasher.combine(field.name)
            hasher.combine(field.value)
        }
    }
}

extension StringProtocol {
    var trimmingSpaces: Substring {
        let view = Substring(self)
        let start = view.firstIndex { $0 != " " && $0 != "\t" } ?? view.endIndex
        let end = view.lastIndex { $0 != " " && $0 != "\t" }.map { view.index(after: $0) } ?? start
        return view[start..<Swift.max(start, end)]
    }
}

/// An HTTP/1.1 request to write (RFC 9112 §3).
public struct HTTPRequest: Hashable, Sendable {
    /// The method (`GET`, `POST`).
    public var method: String
    /// The request target: the path and query (`/hub/negotiate?negotiateVersion=1`).
    public var target: String
    /// The `Host` header's value (`example.com`, `example.com:8080`).
    public var host: String
    /// Further headers (`Host` and, for a body, `Content-Length` are written by `serialize`).
    public var headers: HTTPHeaders
    /// The body.
    public var body: [UInt8]

    /// A request.
    public init(method: String, target: String, host: String, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.method = method
        self.target = target
        self.host = host
        self.headers = headers
        self.body = body
    }

    /// The request's bytes. Precondition: no CR or LF in any name, value or the target (a header
    /// injection is the caller's bug).
    public func serialize() -> [UInt8] {
        func clean(_ text: String) -> String {
            precondition(
                !text.utf8.contains(13) && !text.utf8.contains(10),
                "CR or LF in an HTTP request line or header"
            )
            return text
        }
        var text = "\(clean(method)) \(clean(target)) HTTP/1.1\r\nHost: \(clean(host))\r\n"
        for field in headers { text += "\(clean(field.name)): \(clean(field.value))\r\n" }
        if !body.isEmpty || method == "POST" || method == "PUT" { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }
}

/// A response's status line and header fields.
public struct HTTPResponseHead: Hashable, Sendable {
    /// The status code.
    public var status: Int
    /// The reason phrase (informational only).
    public var reason: String
    /// The header fields.
    public var headers: HTTPHeaders
}

/// A whole response: head and body.
public struct HTTPResponse: Hashable, Sendable {
    /// The head.
    public var head: HTTPResponseHead
    /// The body (chunked bodies joined).
    public var body: [UInt8]
}

/// An incremental HTTP/1.1 response parser (RFC 9112): the head, then the body as
/// `Content-Length`, chunked (RFC 9112 §7.1), or up to the end of the connection says. Any split
/// of the input gives the same result. For an upgrade (`101`), the head ends the response and
/// `remainder` holds what followed (the first WebSocket bytes).
public struct HTTPResponseParser: Sendable {
    /// Limits, each a `tooLarge` error when exceeded.
    public struct Configuration: Sendable, Hashable {
        /// The most bytes of status line and header fields (default 16 KiB).
        public var maximumHeadSize: Int
        /// The most header fields (default 100).
        public var maximumHeaderCount: Int
        /// The most body bytes (default 4 MiB; a negotiate response is a few hundred).
        public var maximumBodySize: Int

        /// Limits.
        public init(maximumHeadSize: Int = 16 * 1024, maximumHeaderCount: Int = 100, maximumBodySize: Int = 4 << 20) {
            self.maximumHeadSize = maximumHeadSize
            self.maximumHeaderCount = maximumHeaderCount
            self.maximumBodySize = maximumBodySize
        }
    }

    private enum Step: Sendable {
        case head
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkEnd
        case trailers
        case untilClose
        case done
    }

    /// The limits.
    public let configuration: Configuration
    private var buffer: [UInt8] = []
    private var position = 0
    private var step = Step.head
    private var head: HTTPResponseHead?
    /// How far the search for the head's end got (the buffer does not move while in the head).
    private var headScan = (index: 0, lineStart: 0)
    private var body: [UInt8] = []
    /// Whether the request was `HEAD` (no body follows whatever the headers say).
    private let requestWasHead: Bool

    /// A parser for the response to one request.
    public init(configuration: Configuration = Configuration(), requestMethod: String = "GET") {
        self.configuration = configuration
        requestWasHead = requestMethod == "HEAD"
    }

    /// Adds received bytes.
    public mutating func append(_ bytes: Span<UInt8>) {
        buffer.append(copying: bytes)
    }

    /// Adds received bytes.
    public mutating func append(_ bytes: [UInt8]) {
        buffer += bytes
    }

    /// Adds received bytes.
    public mutating func append(_ bytes: ArraySlice<UInt8>) {
        buffer += bytes
    }

    /// The response, once complete; nil while more bytes are needed.
    public mutating func response() throws(HTTPError) -> HTTPResponse? {
        guard try advance() else { return nil }
        compact()
        return HTTPResponse(head: head!, body: body)
    }

    /// Streaming (a body read as it arrives, such as an event stream that does not end): the
    /// head, once it is complete. Then `takeBody()` hands over the body in pieces.
    public mutating func readHead() throws(HTTPError) -> HTTPResponseHead? {
        _ = try advance()
        return head
    }

    /// Streaming: the body bytes decoded since the last call (chunked framing removed), moved
    /// out. Only what has not been taken counts against `maximumBodySize`, so an endless body
    /// read this way stays bounded by what one read brings.
    public mutating func takeBody() throws(HTTPError) -> [UInt8] {
        _ = try advance()
        var taken: [UInt8] = []
        swap(&taken, &body)
        return taken
    }

    /// Whether the whole response has been read (streaming: once `takeBody()` has taken the
    /// last bytes, nothing more belongs to it).
    public var isComplete: Bool {
        if case .done = step { return true }
        return false
    }

    /// Reads as far as the buffered bytes go; true once the response is complete.
    private mutating func advance() throws(HTTPError) -> Bool {
        while true {
            switch step {
            case .head:
                guard let parsed = try parseHead() else { return false }
                head = parsed
                step = try bodyStep(for: parsed)
            case .fixed(let remaining):
                let available = min(remaining, buffer.count - position)
                try takeBody(available)
                if available < remaining {
                    step = .fixed(remaining: remaining - available)
                    return false
                }
                step = .done
            case .chunkSize:
                guard let line = try takeLine(limit: 1024) else { return false }
                let sizeText = line.split(separator: ";", maxSplits: 1).first.map { String($0.trimmingSpaces) } ?? ""
                guard !sizeText.isEmpty, sizeText.count <= 16, let size = Int(sizeText, radix: 16), size >= 0 else {
                    throw HTTPError(.malformed, "Invalid chunk size '\(line)'.")
                }
                step = size == 0 ? .trailers : .chunkData(remaining: size)
            case .chunkData(let remaining):
                let available = min(remaining, buffer.count - position)
                try takeBody(available)
                if available < remaining {
                    step = .chunkData(remaining: remaining - available)
                    return false
                }
                step = .chunkEnd
            case .chunkEnd:
                guard let line = try takeLine(limit: 2) else { return false }
                guard line.isEmpty else { throw HTTPError(.malformed, "A chunk does not end with CRLF.") }
                step = .chunkSize
            case .trailers:
                guard let line = try takeLine(limit: configuration.maximumHeadSize) else { return false }
                if line.isEmpty { step = .done }
            case .untilClose:
                try takeBody(buffer.count - position)
                return false
            case .done:
                return true
            }
        }
    }

    /// The connection ended: completes a response whose body runs to the end of the connection,
    /// or throws `incomplete`.
    public mutating func endOfInput() throws(HTTPError) -> HTTPResponse {
        if let response = try response() { return response }
        guard case .untilClose = step, let head else {
            throw HTTPError(.incomplete, "The connection closed before the response was complete.")
        }
        step = .done
        return HTTPResponse(head: head, body: body)
    }

    /// The bytes received after the complete response (after a `101`: the upgraded protocol's).
    public var remainder: [UInt8] {
        guard case .done = step else { return [] }
        return Array(buffer[position...])
    }

    // MARK: - Internals

    private mutating func compact() {
        if position > 0, position == buffer.count {
            buffer.removeAll()
            position = 0
        }
    }

    /// Moves `count` buffered bytes to the body.
    private mutating func takeBody(_ count: Int) throws(HTTPError) {
        guard count > 0 else { return }
        guard body.count + count <= configuration.maximumBodySize else {
            throw HTTPError(.tooLarge, "The response body is larger than \(configuration.maximumBodySize) bytes.")
        }
        body += buffer[position..<(position + count)]
        position += count
        if position == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            position = 0
        }
    }

    /// The next line without its CRLF (a bare LF is accepted, RFC 9112 §2.2), or nil.
    private mutating func takeLine(limit: Int) throws(HTTPError) -> String? {
        guard let newline = buffer[position...].firstIndex(of: 10) else {
            guard buffer.count - position <= limit else {
                throw HTTPError(.tooLarge, "A line is longer than \(limit) bytes.")
            }
            return nil
        }
        guard newline - position <= limit else { throw HTTPError(.tooLarge, "A line is longer than \(limit) bytes.") }
        var end = newline
        if end > position, buffer[end - 1] == 13 { end -= 1 }
        let line = buffer[position..<end]
        position = newline + 1
        guard let text = String(validating: line, as: UTF8.self) else {
            throw HTTPError(.malformed, "A line is not UTF-8.")
        }
        return text
    }

    private mutating func parseHead() throws(HTTPError) -> HTTPResponseHead? {
        // Find the empty line that ends the head before reading any of it, resuming where the
        // last call stopped (no byte is scanned twice).
        let start = position
        var index = max(headScan.index, position)
        var lineStart = max(headScan.lineStart, position)
        var end: Int?
        defer { headScan = (index, lineStart) }
        while index < buffer.count {
            if buffer[index] == 10 {
                let length = index - lineStart - (index > lineStart && buffer[index - 1] == 13 ? 1 : 0)
                if length == 0 {
                    end = index + 1
                    break
                }
                lineStart = index + 1
            }
            index += 1
        }
        guard let end else {
            guard buffer.count - start <= configuration.maximumHeadSize else {
                throw HTTPError(.tooLarge, "The response head is larger than \(configuration.maximumHeadSize) bytes.")
            }
            return nil
        }
        guard end - start <= configuration.maximumHeadSize else {
            throw HTTPError(.tooLarge, "The response head is larger than \(configuration.maximumHeadSize) bytes.")
        }
        guard let statusLine = try takeLine(limit: configuration.maximumHeadSize) else { return nil }
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] == "HTTP/1.1" || parts[0] == "HTTP/1.0", parts[1].count == 3,
            let status = Int(parts[1]), status >= 100
        else {
            throw HTTPError(.malformed, "Invalid status line '\(statusLine.prefix(100))'.")
        }
        var headers = HTTPHeaders()
        while let line = try takeLine(limit: configuration.maximumHeadSize), !line.isEmpty {
            guard let first = line.first, first != " " && first != "\t" else {
                throw HTTPError(.malformed, "Obsolete line folding in a header.")
            }
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                !line[..<colon].contains(where: { $0 == " " || $0 == "\t" })
            else {
                throw HTTPError(.malformed, "Invalid header line '\(line.prefix(100))'.")
            }
            headers.add(String(line[..<colon]), String(line[line.index(after: colon)...].trimmingSpaces))
            guard headers.fields.count <= configuration.maximumHeaderCount else {
                throw HTTPError(.tooLarge, "More than \(configuration.maximumHeaderCount) header fields.")
            }
        }
        return HTTPResponseHead(status: status, reason: parts.count > 2 ? String(parts[2]) : "", headers: headers)
    }

    /// How the body of a response with `head` is delimited (RFC 9112 §6.3).
    private func bodyStep(for head: HTTPResponseHead) throws(HTTPError) -> Step {
        if requestWasHead || (100..<200).contains(head.status) || head.status == 204 || head.status == 304 {
            return .done
        }
        if let encoding = head.headers.values("Transfer-Encoding").last {
            guard encoding.split(separator: ",").last.map({ HTTPHeaders.equal($0.trimmingSpaces, "chunked") }) == true
            else {
                return .untilClose
            }
            return .chunkSize
        }
        let lengths = Set(
            head.headers.values("Content-Length").flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces }
        )
        guard !lengths.isEmpty else { return .untilClose }
        guard lengths.count == 1, let text = lengths.first, text.allSatisfy(\.isNumber), text.count <= 15,
            let length = Int(text)
        else {
            throw HTTPError(.malformed, "Invalid Content-Length.")
        }
        guard length <= configuration.maximumBodySize else {
            throw HTTPError(.tooLarge, "The response body is larger than \(configuration.maximumBodySize) bytes.")
        }
        return length == 0 ? .done : .fixed(remaining: length)
    }
}
