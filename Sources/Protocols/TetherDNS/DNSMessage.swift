public import TetherCore

/// DNS messages as RFC 1035 writes them, for the lookups a client makes before it connects (XMPP's
/// RFC 6120 §3.2 SRV records, XEP-0368's direct-TLS records, then A and AAAA): a query writer and
/// a response reader with name compression, the record types those lookups use (A, AAAA, CNAME,
/// SRV per RFC 2782; others are skipped), truncation, limits and typed errors. Sans-IO: bytes in,
/// values out (`Specs/dns.md`).
public enum DNSRecordType: UInt16, Hashable, Sendable, CaseIterable {
    /// An IPv4 address (A, RFC 1035).
    case a = 1
    /// An alias (CNAME, RFC 1035).
    case cname = 5
    /// An IPv6 address (AAAA, RFC 3596).
    case aaaa = 28
    /// A service location (SRV, RFC 2782).
    case srv = 33
}

/// A question: a name and a record type (class IN).
public struct DNSQuestion: Hashable, Sendable {
    /// The name, without the trailing dot, as given (compared case-insensitively).
    public var name: String
    /// The record type asked for.
    public var type: DNSRecordType

    /// A question for `type` records of `name`.
    public init(name: String, type: DNSRecordType) {
        self.name = name
        self.type = type
    }
}

/// One resource record of a type the reader knows.
public enum DNSRecordData: Hashable, Sendable {
    /// An IPv4 address, as its four bytes.
    case a([UInt8])
    /// An IPv6 address, as its sixteen bytes.
    case aaaa([UInt8])
    /// The canonical name the owner name stands for.
    case cname(String)
    /// A service location (RFC 2782): a `target` of "." means the service is not offered there.
    case srv(priority: UInt16, weight: UInt16, port: UInt16, target: String)
}

extension DNSRecordData: CustomStringConvertible {
    /// The record as a zone file writes its data: `192.0.2.1`, `2001:db8:0:0:0:0:0:1`,
    /// `CNAME host.example.`, `SRV 10 60 5222 xmpp.example.`.
    public var description: String {
        switch self {
        case .a(let bytes): bytes.map(String.init).joined(separator: ".")
        case .aaaa(let bytes):
            stride(from: 0, to: bytes.count - 1, by: 2).map {
                String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16)
            }.joined(separator: ":")
        case .cname(let name): "CNAME \(name)"
        case .srv(let priority, let weight, let port, let target): "SRV \(priority) \(weight) \(port) \(target)"
        }
    }
}

extension DNSRecordType: CustomStringConvertible {
    /// `A`, `CNAME`, `AAAA`, `SRV`.
    public var description: String {
        switch self {
        case .a: "A"
        case .cname: "CNAME"
        case .aaaa: "AAAA"
        case .srv: "SRV"
        }
    }
}

/// A resource record of an answer.
public struct DNSRecord: Hashable, Sendable {
    /// The owner name.
    public var name: String
    /// How long the record may be cached, in seconds.
    public var ttl: UInt32
    /// The record's data.
    public var data: DNSRecordData

    /// A record of `name` with `ttl` and `data`.
    public init(name: String, ttl: UInt32, data: DNSRecordData) {
        self.name = name
        self.ttl = ttl
        self.data = data
    }
}

/// Why a DNS message cannot be read or used.
public typealias DNSError = TetherError<DNSErrorKind>

/// What kind of DNS failure (`DNSError`).
public enum DNSErrorKind: String, ErrorKind {
    /// Not a well-formed message: cut short, a bad label or pointer, a record whose data does
    /// not fit its type.
    case malformed
    /// A configured limit was exceeded (records, compression jumps, message size).
    case tooLarge
    /// The response does not answer the query (another ID, another question, not a response).
    case mismatched
    /// A name that cannot be asked (empty label, a label over 63 bytes, a name over 253).
    case invalidName
}

/// A response as read.
public struct DNSResponse: Hashable, Sendable {
    /// The response code (0 no error, 2 server failure, 3 no such name, …).
    public enum ResponseCode: Hashable, Sendable {
        /// No error (RCODE 0).
        case noError
        /// The server could not read the query (1).
        case formatError
        /// The server failed (2).
        case serverFailure
        /// The name does not exist (NXDOMAIN, 3).
        case nameError
        /// The server does not support the query (4).
        case notImplemented
        /// The server refused to answer (5).
        case refused
        /// Another code.
        case other(UInt8)

        init(_ code: UInt8) {
            switch code {
            case 0: self = .noError
            case 1: self = .formatError
            case 2: self = .serverFailure
            case 3: self = .nameError
            case 4: self = .notImplemented
            case 5: self = .refused
            default: self = .other(code)
            }
        }
    }

    /// The message id, matching the query's.
    public var id: UInt16
    /// The TC bit: the answer did not fit (over UDP: ask again over TCP).
    public var isTruncated: Bool
    /// Whether the answer is authoritative (AA).
    public var isAuthoritative: Bool
    /// The response code.
    public var responseCode: ResponseCode
    /// The question the response repeats.
    public var question: DNSQuestion?
    /// The answer section's records of the known types (others skipped).
    public var answers: [DNSRecord]

    /// The records of `type` for `name`, following CNAME records from `name` (at most
    /// `maximumChain` of them, so a loop ends): what a lookup of `name` yields.
    public func records(for name: String, type: DNSRecordType, maximumChain: Int = 8) -> [DNSRecordData] {
        var current = name
        for _ in 0...maximumChain {
            let owned = answers.filter { DNSMessage.sameName($0.name, current) }
            let wanted = owned.map(\.data).filter { $0.type == type }
            if !wanted.isEmpty || type == .cname { return wanted }
            guard case .cname(let next)? = owned.lazy.map(\.data).first(where: { $0.type == .cname }) else { return [] }
            current = next
        }
        return []
    }
}

extension DNSRecordData {
    /// The record's type.
    public var type: DNSRecordType {
        switch self {
        case .a: .a
        case .aaaa: .aaaa
        case .cname: .cname
        case .srv: .srv
        }
    }
}

/// The DNS message codec.
public enum DNSMessage {
    /// Limits on what a response may hold, each a `tooLarge` error.
    public struct Limits: Hashable, Sendable {
        /// The largest message read (default 65,535, the most TCP can frame).
        public var maximumMessageSize: Int
        /// The most records in all sections together (default 256).
        public var maximumRecords: Int
        /// The most compression pointers followed in one name (default 16).
        public var maximumPointers: Int

        /// Limits for a message: its size, its records, and the compression pointers followed in one name.
        public init(maximumMessageSize: Int = 65535, maximumRecords: Int = 256, maximumPointers: Int = 16) {
            self.maximumMessageSize = maximumMessageSize
            self.maximumRecords = maximumRecords
            self.maximumPointers = maximumPointers
        }
    }

    /// The UDP payload size offered with EDNS(0) (RFC 6891): 1,232 bytes, the size the DNS
    /// flag day 2020 settled on (no IP fragmentation on common paths).
    public static let udpPayloadSize: UInt16 = 1232

    /// A query for `question` with `id`, recursion desired, and an EDNS(0) OPT record offering
    /// `udpPayloadSize` bytes.
    public static func query(_ question: DNSQuestion, id: UInt16) throws(DNSError) -> [UInt8] {
        var bytes: [UInt8] = [
            UInt8(id >> 8), UInt8(id & 0xFF),
            0x01, 0x00,  // standard query, recursion desired
            0, 1, 0, 0, 0, 0, 0, 1,  // one question, no answers or authority, one additional (OPT)
        ]
        try writeName(question.name, into: &bytes)
        bytes += [UInt8(question.type.rawValue >> 8), UInt8(question.type.rawValue & 0xFF), 0, 1]
        // OPT: root name, type 41, class = UDP payload size, TTL 0, no data.
        bytes += [0, 0, 41, UInt8(udpPayloadSize >> 8), UInt8(udpPayloadSize & 0xFF), 0, 0, 0, 0, 0, 0]
        return bytes
    }

    /// Reads a response. Sections after the answers are not read (the lookups need only the
    /// answers); records of unknown types are skipped.
    public static func parse(_ bytes: [UInt8], limits: Limits = Limits()) throws(DNSError) -> DNSResponse {
        guard bytes.count <= limits.maximumMessageSize else {
            throw DNSError(.tooLarge, "The message is larger than \(limits.maximumMessageSize) bytes.")
        }
        var reader = Reader(bytes: bytes, limits: limits)
        let id = try reader.u16()
        let flags = try reader.u16()
        let questions = Int(try reader.u16())
        let answerCount = Int(try reader.u16())
        let authority = Int(try reader.u16())
        let additional = Int(try reader.u16())
        guard flags & 0x8000 != 0 else { throw DNSError(.mismatched, "The message is a query, not a response.") }
        guard questions + answerCount + authority + additional <= limits.maximumRecords else {
            throw DNSError(.tooLarge, "The message holds more than \(limits.maximumRecords) records.")
        }
        let isTruncated = flags & 0x0200 != 0
        var question: DNSQuestion?
        var answers: [DNSRecord] = []
        do throws(DNSError) {
            for index in 0..<questions {
                let name = try reader.name()
                let type = try reader.u16()
                _ = try reader.u16()  // class
                if index == 0, let known = DNSRecordType(rawValue: type) {
                    question = DNSQuestion(name: name, type: known)
                }
            }
            for _ in 0..<answerCount {
                if let record = try reader.record() { answers.append(record) }
            }
        } catch  where isTruncated && error.kind == .malformed {
            // A truncated answer may stop anywhere: keep what was whole; the caller asks over TCP.
        }
        return DNSResponse(
            id: id,
            isTruncated: isTruncated,
            isAuthoritative: flags & 0x0400 != 0,
            responseCode: DNSResponse.ResponseCode(UInt8(flags & 0x000F)),
            question: question,
            answers: answers
        )
    }

    /// Reads a response to the query `id` for `question`: a different ID or question is
    /// `mismatched` (a stray or spoofed answer, which a resolver ignores).
    public static func parse(
        _ bytes: [UInt8],
        answering question: DNSQuestion,
        id: UInt16,
        limits: Limits = Limits()
    ) throws(DNSError) -> DNSResponse {
        let response = try parse(bytes, limits: limits)
        guard response.id == id else { throw DNSError(.mismatched, "The response has another ID.") }
        guard let asked = response.question, asked.type == question.type, sameName(asked.name, question.name) else {
            throw DNSError(.mismatched, "The response answers another question.")
        }
        return response
    }

    /// Whether two names are the same (ASCII case-insensitive, a trailing dot ignored).
    public static func sameName(_ a: String, _ b: String) -> Bool {
        func normalized(_ name: String) -> [UInt8] {
            var bytes = Array(name.utf8)
            if bytes.last == UInt8(ascii: ".") { bytes.removeLast() }
            return bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
        }
        return normalized(a) == normalized(b)
    }

    static func writeName(_ name: String, into bytes: inout [UInt8]) throws(DNSError) {
        var labels = name.split(separator: ".", omittingEmptySubsequences: false)
        if labels.last == "" { labels.removeLast() }  // a trailing dot
        guard !labels.isEmpty, name.utf8.count <= 253 else {
            throw DNSError(.invalidName, "'\(name)' is not a name that can be looked up.")
        }
        for label in labels {
            let utf8 = Array(label.utf8)
            guard !utf8.isEmpty, utf8.count <= 63 else {
                throw DNSError(.invalidName, "'\(name)' has an empty label or one longer than 63 bytes.")
            }
            bytes.append(UInt8(utf8.count))
            bytes += utf8
        }
        bytes.append(0)
    }

    /// Reads a message from its start.
    struct Reader {
        let bytes: [UInt8]
        let limits: Limits
        var offset = 0

        init(bytes: [UInt8], limits: Limits) {
            self.bytes = bytes
            self.limits = limits
        }

        mutating func u8() throws(DNSError) -> UInt8 {
            guard offset < bytes.count else { throw DNSError(.malformed, "The message ends early.") }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func u16() throws(DNSError) -> UInt16 {
            UInt16(try u8()) << 8 | UInt16(try u8())
        }

        mutating func u32() throws(DNSError) -> UInt32 {
            UInt32(try u16()) << 16 | UInt32(try u16())
        }

        /// A name at the current offset, following compression pointers (RFC 1035 §4.1.4); each
        /// pointer must point before the label it replaces, so reading always ends.
        mutating func name() throws(DNSError) -> String {
            var labels: [String] = []
            var length = 0
            var position = offset
            var jumped = false
            var pointers = 0
            while true {
                guard position < bytes.count else { throw DNSError(.malformed, "A name runs past the message.") }
                let byte = bytes[position]
                switch byte & 0xC0 {
                case 0x00:
                    if byte == 0 {
                        if !jumped { offset = position + 1 }
                        return labels.isEmpty ? "." : labels.joined(separator: ".")
                    }
                    let end = position + 1 + Int(byte)
                    guard end <= bytes.count else { throw DNSError(.malformed, "A label runs past the message.") }
                    length += Int(byte) + 1
                    guard length <= 255 else { throw DNSError(.malformed, "A name is longer than 255 bytes.") }
                    labels.append(String(decoding: bytes[(position + 1)..<end], as: UTF8.self))
                    position = end
                case 0xC0:
                    guard position + 1 < bytes.count else { throw DNSError(.malformed, "A pointer is cut short.") }
                    let target = Int(byte & 0x3F) << 8 | Int(bytes[position + 1])
                    guard target < position else { throw DNSError(.malformed, "A compression pointer points forward.") }
                    pointers += 1
                    guard pointers <= limits.maximumPointers else {
                        throw DNSError(.tooLarge, "A name follows more than \(limits.maximumPointers) pointers.")
                    }
                    if !jumped { offset = position + 2 }
                    jumped = true
                    position = target
                default:
                    throw DNSError(.malformed, "A label has the reserved type bits \(byte >> 6).")
                }
            }
        }

        /// A record of the answer section; nil for a type the reader does not know.
        mutating func record() throws(DNSError) -> DNSRecord? {
            let owner = try name()
            let type = try u16()
            let recordClass = try u16()
            let ttl = try u32()
            let length = Int(try u16())
            let end = offset + length
            guard end <= bytes.count else { throw DNSError(.malformed, "A record's data runs past the message.") }
            defer { offset = end }
            guard recordClass == 1, let known = DNSRecordType(rawValue: type) else { return nil }
            let data: DNSRecordData
            switch known {
            case .a:
                guard length == 4 else { throw DNSError(.malformed, "An A record's data is not 4 bytes.") }
                data = .a(Array(bytes[offset..<end]))
            case .aaaa:
                guard length == 16 else { throw DNSError(.malformed, "An AAAA record's data is not 16 bytes.") }
                data = .aaaa(Array(bytes[offset..<end]))
            case .cname:
                let target = try name()
                guard offset <= end else { throw DNSError(.malformed, "A CNAME runs past its record.") }
                data = .cname(target)
            case .srv:
                guard length >= 7 else { throw DNSError(.malformed, "An SRV record is shorter than 7 bytes.") }
                let priority = try u16()
                let weight = try u16()
                let port = try u16()
                let target = try name()
                guard offset <= end else { throw DNSError(.malformed, "An SRV record's target runs past its record.") }
                data = .srv(priority: priority, weight: weight, port: port, target: target)
            }
            return DNSRecord(name: owner, ttl: ttl, data: data)
        }
    }
}
