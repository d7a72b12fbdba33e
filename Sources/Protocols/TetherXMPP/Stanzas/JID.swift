/// An XMPP address (RFC 7622): `[localpart@]domainpart[/resourcepart]`.
///
/// Parsing validates what the RFC requires without a full PRECIS implementation: each part is 1
/// to 1023 bytes of UTF-8; the localpart has none of `"&'/:<>@`, no whitespace and no control
/// characters; the resourcepart has no control characters; the domainpart is lower-cased (ASCII;
/// internationalised labels pass through unchanged), loses a trailing dot, and may be an IP
/// literal in brackets.
public struct JID: Hashable, Sendable, CustomStringConvertible, LosslessStringConvertible {
    /// The localpart (the user), if any.
    public let localpart: String?
    /// The domainpart (the server).
    public let domainpart: String
    /// The resourcepart (the client instance), if any.
    public let resourcepart: String?

    /// The most bytes of UTF-8 in each part (RFC 7622 §3.1).
    public static let maximumPartLength = 1023

    /// Why a string is not a valid JID.
    public enum ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        /// A localpart was marked (`@`) but is empty.
        case emptyLocalpart
        /// The domainpart is empty.
        case emptyDomainpart
        /// A resourcepart was marked (`/`) but is empty.
        case emptyResourcepart
        /// A part is longer than RFC 7622's 1,023 bytes.
        case partTooLong(part: String, bytes: Int)
        /// The localpart holds a character RFC 7622 forbids there.
        case forbiddenCharacterInLocalpart(Unicode.Scalar)
        /// The resourcepart holds a control character.
        case controlCharacterInResourcepart
        /// The domainpart is not a valid domain name or IP address.
        case invalidDomainpart

        public var description: String {
            switch self {
            case .emptyLocalpart: "The localpart before '@' is empty."
            case .emptyDomainpart: "The domainpart is empty."
            case .emptyResourcepart: "The resourcepart after '/' is empty."
            case .partTooLong(let part, let bytes): "The \(part) is \(bytes) bytes long; at most 1023 are allowed."
            case .forbiddenCharacterInLocalpart(let scalar):
                "The localpart contains the forbidden character U+\(String(scalar.value, radix: 16, uppercase: true))."
            case .controlCharacterInResourcepart: "The resourcepart contains a control character."
            case .invalidDomainpart: "The domainpart is not a valid domain name or IP literal."
            }
        }
    }

    /// Parses and validates a JID.
    public init(parsing string: String) throws(ParseError) {
        var rest = Substring(string)
        var resource: Substring?
        if let slash = rest.firstIndex(of: "/") {
            resource = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
        }
        var local: Substring?
        if let at = rest.firstIndex(of: "@") {
            local = rest[..<at]
            rest = rest[rest.index(after: at)...]
        }
        try self.init(
            localpart: local.map(String.init),
            domainpart: String(rest),
            resourcepart: resource.map(String.init)
        )
    }

    /// Validates and assembles a JID from its parts.
    public init(localpart: String? = nil, domainpart: String, resourcepart: String? = nil) throws(ParseError) {
        if let localpart {
            guard !localpart.isEmpty else { throw .emptyLocalpart }
            guard localpart.utf8.count <= Self.maximumPartLength else {
                throw .partTooLong(part: "localpart", bytes: localpart.utf8.count)
            }
            for scalar in localpart.unicodeScalars {
                let forbidden =
                    scalar.value < 0x80
                    // ASCII: the listed characters, controls, space and the other whitespace (all
                    // below 0x21), DEL; only the rest needs the Unicode property.
                    ? scalar.value < 0x21 || scalar.value == 0x7F || "\"&'/:<>@".unicodeScalars.contains(scalar)
                    : scalar.value <= 0x9F || scalar.properties.isWhitespace
                if forbidden { throw .forbiddenCharacterInLocalpart(scalar) }
            }
        }
        var domain = domainpart
        if domain.hasSuffix(".") { domain.removeLast() }
        guard !domain.isEmpty else { throw .emptyDomainpart }
        guard domain.utf8.count <= Self.maximumPartLength else {
            throw .partTooLong(part: "domainpart", bytes: domain.utf8.count)
        }
        domain = try Self.normalizedDomain(domain)
        if let resourcepart {
            guard !resourcepart.isEmpty else { throw .emptyResourcepart }
            guard resourcepart.utf8.count <= Self.maximumPartLength else {
                throw .partTooLong(part: "resourcepart", bytes: resourcepart.utf8.count)
            }
            for scalar in resourcepart.unicodeScalars where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
            {
                throw .controlCharacterInResourcepart
            }
        }
        self.localpart = localpart
        self.domainpart = domain
        self.resourcepart = resourcepart
    }

    /// Parts taken from a JID already (validated and normalized then).
    private init(validatedLocalpart localpart: String?, domainpart: String, resourcepart: String?) {
        self.localpart = localpart
        self.domainpart = domainpart
        self.resourcepart = resourcepart
    }

    /// Lower-cases ASCII letters and checks the domain's shape: DNS labels (letters, digits,
    /// hyphens, or any non-ASCII for internationalised labels) separated by dots, or an IP literal.
    static func normalizedDomain(_ domain: String) throws(ParseError) -> String {
        if domain.hasPrefix("[") {
            guard domain.hasSuffix("]"), domain.count > 2,
                domain.dropFirst().dropLast().allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." })
            else { throw .invalidDomainpart }
            return domain.lowercased()
        }
        if let ascii = try normalizedASCIIDomain(domain) { return ascii }
        var result = ""
        result.reserveCapacity(domain.utf8.count)
        for label in domain.split(separator: ".", omittingEmptySubsequences: false) {
            guard !label.isEmpty, label.utf8.count <= 63 || label.contains(where: { !$0.isASCII }) else {
                throw .invalidDomainpart
            }
            for scalar in label.unicodeScalars {
                let allowed =
                    scalar.value >= 0x80
                    || ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
                    || scalar == "-"
                    || scalar == "_"
                // (The allowed ASCII is no whitespace; only the rest needs the Unicode property.)
                guard allowed, scalar.value < 0x80 || !scalar.properties.isWhitespace else {
                    throw .invalidDomainpart
                }
            }
            if !result.isEmpty { result.append(".") }
            result += label.lowercased()
        }
        return result
    }

    /// The common case of `normalizedDomain`, on the UTF-8 bytes: a host name of ASCII letters,
    /// digits, `-` and `_` in labels of 1 to 63, lowercased (the same string when it has no
    /// capital). Nil when the domain has any other byte: the general path decides then.
    private static func normalizedASCIIDomain(_ domain: String) throws(ParseError) -> String? {
        var labelLength = 0
        var hasCapital = false
        for byte in domain.utf8 {
            switch byte {
            case UInt8(ascii: "."):
                guard labelLength > 0 else { throw .invalidDomainpart }
                labelLength = 0
                continue
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"),
                UInt8(ascii: "_"):
                labelLength += 1
            case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                labelLength += 1
                hasCapital = true
            default:
                return nil
            }
            guard labelLength <= 63 else { throw .invalidDomainpart }
        }
        guard labelLength > 0 else { throw .invalidDomainpart }
        guard hasCapital else { return domain }
        return String(
            decoding: domain.utf8.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 | 0x20 : $0 },
            as: UTF8.self
        )
    }

    /// Parses `description`; nil if it is not a valid JID.
    public init?(_ description: String) {
        guard let jid = try? JID(parsing: description) else { return nil }
        self = jid
    }

    /// The JID without its resource.
    public var bare: JID {
        JID(validatedLocalpart: localpart, domainpart: domainpart, resourcepart: nil)
    }

    /// The JID of the domain alone (the user's server).
    public var domainJID: JID {
        JID(validatedLocalpart: nil, domainpart: domainpart, resourcepart: nil)
    }

    /// Whether the JID has no resource.
    public var isBare: Bool { resourcepart == nil }

    /// The same JID with `resource` as its resourcepart.
    public func with(resource: String) throws(ParseError) -> JID {
        try JID(localpart: localpart, domainpart: domainpart, resourcepart: resource)
    }

    /// `local@domain/resource`.
    public var description: String {
        var text = localpart.map { $0 + "@" } ?? ""
        text += domainpart
        if let resourcepart { text += "/" + resourcepart }
        return text
    }
}
