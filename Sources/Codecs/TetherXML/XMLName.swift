/// A namespace-qualified XML name: namespace URI, local name and, for faithful re-serialisation,
/// the prefix it was written with.
///
/// Two names are equal when namespace and local name are (the prefix is presentation only).
public struct XMLName: Hashable, Sendable, CustomStringConvertible {
    /// The namespace URI, or nil for a name in no namespace.
    public var namespace: String?
    /// The local part.
    public var local: String
    /// The prefix it was (or should be) written with; nil for the default namespace or none.
    public var prefix: String?

    /// Creates a name.
    public init(_ local: String, namespace: String? = nil, prefix: String? = nil) {
        self.local = local
        self.namespace = namespace
        self.prefix = prefix
    }

    /// The namespace of `xml:` names (`xml:lang`), bound without a declaration.
    public static let xmlNamespace = "http://www.w3.org/XML/1998/namespace"

    /// `{namespace}local`, or `local` without a namespace (Clark notation).
    public var description: String {
        namespace.map { "{\($0)}\(local)" } ?? local
    }

    public static func == (lhs: XMLName, rhs: XMLName) -> Bool {
        lhs.local == rhs.local && lhs.namespace == rhs.namespace
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(local)
        hasher.combine(namespace)
    }
}

/// A namespace declaration (`xmlns='…'` or `xmlns:prefix='…'`).
public struct XMLNamespaceDeclaration: Hashable, Sendable {
    /// The declared prefix; nil for the default namespace.
    public var prefix: String?
    /// The namespace URI (empty to undeclare the default namespace).
    public var uri: String

    /// Creates a declaration.
    public init(prefix: String?, uri: String) {
        self.prefix = prefix
        self.uri = uri
    }
}

/// An attribute: a name and its (already unescaped) value.
public struct XMLAttribute: Hashable, Sendable {
    /// The attribute's name (unprefixed attributes are in no namespace).
    public var name: XMLName
    /// The value, with entities and character references resolved.
    public var value: String

    /// Creates an attribute.
    public init(_ name: XMLName, _ value: String) {
        self.name = name
        self.value = value
    }
}
