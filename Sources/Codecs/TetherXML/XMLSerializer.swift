@_spi(TetherInternal) import TetherCore

/// The namespace bindings in force where an element is written: the default namespace and the
/// prefixes declared by its ancestors (for stanzas, those of the stream header).
public struct XMLNamespaceScope: Sendable, Equatable {
    /// The default namespace URI ("" when none).
    public var defaultNamespace: String
    /// Bound prefixes → URIs (`xml` is always bound and need not be listed).
    public var prefixes: [String: String]

    /// A scope; an empty one (the default) suits a standalone document.
    public init(defaultNamespace: String = "", prefixes: [String: String] = [:]) {
        self.defaultNamespace = defaultNamespace
        self.prefixes = prefixes
    }

    /// The scope inside a client stream header: default `jabber:client`, `stream:` bound.
    public static let clientStream = XMLNamespaceScope(
        defaultNamespace: "jabber:client",
        prefixes: ["stream": "http://etherx.jabber.org/streams"]
    )

    func uri(for prefix: String?) -> String? {
        guard let prefix else { return defaultNamespace }
        if prefix == "xml" { return XMLName.xmlNamespace }
        return prefixes[prefix]
    }

    mutating func bind(_ prefix: String?, to uri: String) {
        if let prefix {
            prefixes[prefix] = uri
        } else {
            defaultNamespace = uri
        }
    }
}

/// Writes XML: stream headers and footers, and elements with their namespaces declared only
/// where the scope does not already bind them, so that each serialised stanza parses on its own
/// (with an empty scope) or inside its stream (with the stream's scope).
///
/// Text escapes `&`, `<`, `>` and carriage returns; attribute values are single-quoted and escape
/// `&`, `<`, `'` and the whitespace characters that attribute normalisation would otherwise change,
/// so parsing what was written gives back the same values.
public enum XMLSerializer {
    /// The element as a string, namespaces declared relative to `scope`.
    public static func string(_ element: XElement, in scope: XMLNamespaceScope = XMLNamespaceScope()) -> String {
        var bytes: [UInt8] = []
        write(element, in: scope, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the element to `bytes`, namespaces declared relative to `scope`.
    public static func write(_ element: XElement, in scope: XMLNamespaceScope, into bytes: inout [UInt8]) {
        var scope = scope
        var generated = 0
        write(element, &scope, &generated, &bytes)
    }

    /// `write(_:in:into:)` with one more attribute (no namespace; none when nil) on `element`
    /// itself, written after its own: the bytes of `element` with that attribute added, without
    /// building that tree. `element` must not have an attribute of that name.
    package static func write(
        _ element: XElement,
        in scope: XMLNamespaceScope,
        adding attribute: (local: String, value: String)?,
        into bytes: inout [UInt8]
    ) {
        var scope = scope
        var generated = 0
        write(element, &scope, &generated, &bytes, adding: attribute)
    }

    /// `<?xml version='1.0'?>` and the opening tag of `stream:stream` with `attributes` (values
    /// escaped), declaring `jabber:client` as default and the `stream` prefix.
    public static func streamHeader(
        attributes: [(String, String)],
        defaultNamespace: String = "jabber:client"
    ) -> [UInt8] {
        var bytes = Array("<?xml version='1.0'?><stream:stream".utf8)
        for (name, value) in attributes {
            bytes.append(UInt8(ascii: " "))
            bytes.append(contentsOf: name.utf8)
            bytes.append(contentsOf: "='".utf8)
            appendAttributeValue(value, &bytes)
            bytes.append(UInt8(ascii: "'"))
        }
        bytes.append(contentsOf: " xmlns='".utf8)
        appendAttributeValue(defaultNamespace, &bytes)
        bytes.append(contentsOf: "' xmlns:stream='http://etherx.jabber.org/streams'>".utf8)
        return bytes
    }

    /// `</stream:stream>`.
    public static let streamFooter: [UInt8] = Array("</stream:stream>".utf8)

    /// Appends a literal's bytes, as the serializer does (for bytes written without a tree).
    package static func appendLiteral(_ literal: StaticString, to bytes: inout [UInt8]) {
        append(literal, &bytes)
    }

    /// Appends a literal's bytes (one copy: `append(contentsOf: "…".utf8)` goes through the
    /// generic sequence path, several times the cost for these few bytes).
    @inline(__always)
    private static func append(_ literal: StaticString, _ bytes: inout [UInt8]) {
        bytes.append(copying: unsafe Span(_unsafeStart: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends a string's UTF-8 bytes, the same way.
    @inline(__always)
    private static func append(_ string: String, _ bytes: inout [UInt8]) {
        string.withUTF8Span { bytes.append(copying: $0) }
    }

    private static func qualifiedName(_ prefix: String?, _ local: String, _ bytes: inout [UInt8]) {
        if let prefix, !prefix.isEmpty {
            append(prefix, &bytes)
            bytes.append(UInt8(ascii: ":"))
        }
        append(local, &bytes)
    }

    private static func declare(_ prefix: String?, _ uri: String, _ bytes: inout [UInt8]) {
        append(" xmlns", &bytes)
        if let prefix {
            bytes.append(UInt8(ascii: ":"))
            append(prefix, &bytes)
        }
        append("='", &bytes)
        appendAttributeValue(uri, &bytes)
        bytes.append(UInt8(ascii: "'"))
    }

    private static func write(
        _ element: XElement,
        _ scope: inout XMLNamespaceScope,
        _ generated: inout Int,
        _ bytes: inout [UInt8],
        adding extra: (local: String, value: String)? = nil
    ) {
        // Bindings made here are undone on the way out (cheaper than copying the scope), by
        // `unbind` before each return. (Not a nested function and a `defer`: capturing the
        // scope made every access to it a run-time exclusivity check.)
        var saved = SavedBindings()
        let tree = element.tree
        let name = element.name
        let uri = name.namespace ?? ""
        // A prefix cannot be bound to "no namespace": such names use the default namespace.
        let prefix = uri.isEmpty ? nil : name.prefix
        bytes.append(UInt8(ascii: "<"))
        qualifiedName(prefix, name.local, &bytes)
        // The declarations written on the original element, where the scope lacks them.
        for position in element.headerRange where tree.node(position).kind == .namespace {
            let declaration = tree.name(tree.node(position))
            let declaredURI = declaration.namespace ?? ""
            guard declaration.prefix != "xml", scope.uri(for: declaration.prefix) != declaredURI else { continue }
            if declaration.prefix != nil && declaredURI.isEmpty { continue }
            declare(declaration.prefix, declaredURI, &bytes)
            saved.bind(declaration.prefix, declaredURI, in: &scope)
        }
        if scope.uri(for: prefix) != uri {
            declare(prefix, uri, &bytes)
            saved.bind(prefix, uri, in: &scope)
        }
        for position in element.headerRange where tree.node(position).kind == .attribute {
            let attribute = tree.node(position)
            let attributeName = tree.name(attribute)
            var attributePrefix: String?
            if let namespace = attributeName.namespace, !namespace.isEmpty {
                if namespace == XMLName.xmlNamespace {
                    attributePrefix = "xml"
                } else if let original = attributeName.prefix, original != "xml", scope.uri(for: original) == namespace
                {
                    attributePrefix = original
                } else if let bound = scope.prefixes.first(where: { $0.value == namespace })?.key {
                    attributePrefix = bound
                } else {
                    var candidate = attributeName.prefix ?? ""
                    if candidate.isEmpty || candidate == "xml" || scope.prefixes[candidate] != nil {
                        repeat {
                            generated += 1
                            candidate = "ns\(generated)"
                        } while scope.prefixes[candidate] != nil
                    }
                    declare(candidate, namespace, &bytes)
                    saved.bind(candidate, namespace, in: &scope)
                    attributePrefix = candidate
                }
            }
            bytes.append(UInt8(ascii: " "))
            qualifiedName(attributePrefix, attributeName.local, &bytes)
            append("='", &bytes)
            tree.withBytes(of: attribute) { appendEscaped($0, &bytes, attribute: true) }
            bytes.append(UInt8(ascii: "'"))
        }
        if let extra {
            bytes.append(UInt8(ascii: " "))
            append(extra.local, &bytes)
            append("='", &bytes)
            appendAttributeValue(extra.value, &bytes)
            bytes.append(UInt8(ascii: "'"))
        }
        if element.isEmpty {
            append("/>", &bytes)
            saved.unbind(in: &scope)
            return
        }
        bytes.append(UInt8(ascii: ">"))
        element.forEachChildIndex { position in
            let child = tree.node(position)
            if child.kind == .element {
                write(XElement(tree: tree, index: position), &scope, &generated, &bytes)
            } else {
                tree.withBytes(of: child) { appendText($0, &bytes) }
            }
        }
        append("</", &bytes)
        qualifiedName(prefix, name.local, &bytes)
        bytes.append(UInt8(ascii: ">"))
        saved.unbind(in: &scope)
    }

    /// The bindings an element's writing made in the scope, and what they replaced.
    private struct SavedBindings {
        var defaultNamespace: String?
        var prefixes: [(prefix: String, previous: String?)] = []

        mutating func bind(_ prefix: String?, _ uri: String, in scope: inout XMLNamespaceScope) {
            if let prefix {
                prefixes.append((prefix, scope.prefixes[prefix]))
            } else if defaultNamespace == nil {
                defaultNamespace = scope.defaultNamespace
            }
            scope.bind(prefix, to: uri)
        }

        /// Puts back what the bindings replaced, the last one first.
        func unbind(in scope: inout XMLNamespaceScope) {
            if let defaultNamespace { scope.defaultNamespace = defaultNamespace }
            for saved in prefixes.reversed() { scope.prefixes[saved.prefix] = saved.previous }
        }
    }

    /// Appends character data, escaped.
    public static func appendText(_ text: Span<UInt8>, _ bytes: inout [UInt8]) {
        appendEscaped(text, &bytes, attribute: false)
    }

    /// Appends a single-quoted attribute value's contents, escaped.
    public static func appendAttributeValue(_ value: String, _ bytes: inout [UInt8]) {
        value.withUTF8Span { appendEscaped($0, &bytes, attribute: true) }
    }

    private static func appendEscaped(_ text: Span<UInt8>, _ bytes: inout [UInt8], attribute: Bool) {
        var runStart = 0
        var index = 0
        let count = text.count
        while index < count {
            // Eight bytes per step up to the next byte that may need escaping: below 0x0E (tab,
            // newline, carriage return), `&` or `'` (0x26, 0x27), `<` or `>` (0x3C, 0x3E). Most
            // text and values have none; a byte found is then looked at exactly.
            if index + 8 <= count {
                let word = UInt64(
                    littleEndian: unsafe text.withUnsafeBytes {
                        unsafe $0.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                    }
                )
                let candidates =
                    ((word &- 0x0E0E_0E0E_0E0E_0E0E) & ~word)
                    | zeroBytes((word & 0xFEFE_FEFE_FEFE_FEFE) ^ 0x2626_2626_2626_2626)
                    | zeroBytes((word & 0xFDFD_FDFD_FDFD_FDFD) ^ 0x3C3C_3C3C_3C3C_3C3C)
                let high = candidates & 0x8080_8080_8080_8080
                if high == 0 {
                    index += 8
                    continue
                }
                index += high.trailingZeroBitCount >> 3
            }
            let replacement: StaticString
            switch text[index] {
            case UInt8(ascii: "&"): replacement = "&amp;"
            case UInt8(ascii: "<"): replacement = "&lt;"
            case UInt8(ascii: ">"): replacement = "&gt;"
            case 0x0D: replacement = "&#13;"
            case UInt8(ascii: "'") where attribute: replacement = "&apos;"
            case 0x0A where attribute: replacement = "&#10;"
            case 0x09 where attribute: replacement = "&#9;"
            default:
                index += 1
                continue
            }
            if runStart < index { bytes.append(copying: text.extracting(runStart..<index)) }
            append(replacement, &bytes)
            index += 1
            runStart = index
        }
        if runStart < count { bytes.append(copying: text.extracting(runStart..<count)) }
    }

    /// The high bit of each zero byte of `word` (exact for the lowest one).
    @inline(__always)
    private static func zeroBytes(_ word: UInt64) -> UInt64 {
        (word &- 0x0101_0101_0101_0101) & ~word
    }
}
