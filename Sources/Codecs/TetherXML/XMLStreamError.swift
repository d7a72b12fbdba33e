public import TetherCore

/// Why an XML stream cannot go on: the RFC 6120 stream error condition to close it with (its
/// `kind`, also named `condition`), and a human-readable message (never containing the offending
/// bytes).
public typealias XMLStreamError = TetherError<XMLStreamCondition>

/// The stream error conditions the XML layer can detect (RFC 6120 §4.9.3, §11).
public enum XMLStreamCondition: String, ErrorKind {
    /// A comment, processing instruction, DTD, entity declaration or reference to an entity
    /// other than the five predefined ones (RFC 6120 §11.1).
    case restrictedXML = "restricted-xml"
    /// Not well-formed XML or XML namespaces: mismatched tags, unbound prefixes, invalid UTF-8.
    case notWellFormed = "not-well-formed"
    /// An encoding other than UTF-8, or a byte-order mark (RFC 6120 §11.6).
    case unsupportedEncoding = "unsupported-encoding"
    /// A configured limit was exceeded (element size, depth, attributes, children).
    case policyViolation = "policy-violation"
}

extension TetherError where Family == XMLStreamCondition {
    /// The stream error conditions (`XMLStreamCondition`).
    public typealias Condition = XMLStreamCondition

    /// The stream error condition (the error's `kind`, in RFC 6120's word).
    public var condition: XMLStreamCondition { kind }
}

/// The opening tag of a stream (`<stream:stream …>`).
public struct XMLStreamHeader: Hashable, Sendable {
    /// The root element's name (for XMPP `{http://etherx.jabber.org/streams}stream`).
    public var name: XMLName
    /// The attributes (`to`, `from`, `id`, `version`, `xml:lang`, …), in document order.
    public var attributes: [XMLAttribute]
    /// The namespace declarations (the default namespace and the `stream` prefix).
    public var namespaceDeclarations: [XMLNamespaceDeclaration]

    /// Creates a header.
    public init(name: XMLName, attributes: [XMLAttribute], namespaceDeclarations: [XMLNamespaceDeclaration]) {
        self.name = name
        self.attributes = attributes
        self.namespaceDeclarations = namespaceDeclarations
    }

    /// The value of the attribute `local` in `namespace` (nil: no namespace).
    public func attribute(_ local: String, namespace: String? = nil) -> String? {
        attributes.first { $0.name.local == local && $0.name.namespace == namespace }?.value
    }

    /// The default namespace the header declares ("" if none).
    public var defaultNamespace: String {
        namespaceDeclarations.first { $0.prefix == nil }?.uri ?? ""
    }
}

/// What an XML stream parser reports.
public enum XMLStreamEvent: Hashable, Sendable {
    /// The stream's opening tag.
    case streamOpen(XMLStreamHeader)
    /// A complete top-level element (a stanza or nonza) with its whole subtree.
    case element(XElement)
    /// The stream's closing tag.
    case streamClose
}
