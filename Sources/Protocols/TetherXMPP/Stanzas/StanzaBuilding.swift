public import TetherXML

extension XNode {
    /// The element `<local xmlns=namespace attributes…>children</local>`, for building payloads.
    static func element(
        _ local: String,
        _ namespace: String?,
        _ attributes: [(String, String)] = [],
        _ children: [XNode] = []
    ) -> XNode {
        .element(
            XElement(
                XMLName(local, namespace: namespace),
                attributes: attributes.map { XMLAttribute(XMLName($0.0), $0.1) },
                children: children
            )
        )
    }

    /// A data form field (XEP-0004) with one value.
    static func formField(_ name: String, _ value: String, hidden: Bool = false) -> XNode {
        .element(
            "field",
            XMPPNamespace.dataForms,
            [("var", name)] + (hidden ? [("type", "hidden")] : []),
            [.element("value", XMPPNamespace.dataForms, [], [.text(value)])]
        )
    }
}

extension XMLName {
    /// A name in the client namespace (`jabber:client`), the default namespace of a c2s stream.
    static func client(_ local: String) -> XMLName { XMLName(local, namespace: XMPPNamespace.client) }
}

extension XElement {
    /// A copy with the attribute `local` (no namespace) set to `value`, replacing one of that
    /// name; children and other attributes unchanged.
    public func settingAttribute(_ local: String, to value: String) -> XElement {
        var attributes = self.attributes.filter { !($0.name.local == local && $0.name.namespace == nil) }
        attributes.append(XMLAttribute(XMLName(local), value))
        return XElement(
            name,
            attributes: attributes,
            namespaceDeclarations: namespaceDeclarations,
            children: childNodes
        )
    }

    /// The child elements that are not in `namespace` (a stanza's extensions).
    func children(outside namespace: String) -> [XElement] {
        children.filter { $0.namespace != namespace }
    }
}

/// The common attributes of a stanza under construction, in wire order.
struct StanzaAttributes {
    var attributes: [XMLAttribute] = []

    /// Room for a stanza's usual attributes (type, to, id, xml:lang) at once, instead of the
    /// array growing on the first and second.
    init() {
        attributes.reserveCapacity(4)
    }

    mutating func add(_ local: String, _ value: String?) {
        if let value { attributes.append(XMLAttribute(XMLName(local), value)) }
    }

    mutating func addLanguage(_ value: String?) {
        if let value {
            attributes.append(XMLAttribute(XMLName("lang", namespace: XMLName.xmlNamespace, prefix: "xml"), value))
        }
    }
}

/// A child `<local>text</local>` in the client namespace.
func textChild(_ local: String, _ text: String?) -> XNode? {
    text.map { .element(XElement(.client(local), children: [.text($0)])) }
}

/// XEP-0203 delayed delivery information (`<delay xmlns='urn:xmpp:delay' stamp='…'/>`), which
/// servers add to stanzas they stored or redelivered (prosody does after XEP-0198 resumption).
public struct Delay: Hashable, Sendable {
    /// Who delayed the stanza.
    public var from: JID?
    /// When the stanza was originally sent, as XEP-0082 date-time text (`2024-01-05T12:00:00Z`).
    public var stamp: String
    /// Why, if the server said.
    public var reason: String?

    /// The view of a `<delay/>` element.
    public init?(_ element: XElement) {
        guard element.localName == "delay", element.namespace == XMPPNamespace.delay,
            let stamp = element.attribute("stamp")
        else { return nil }
        self.stamp = stamp
        from = element.attribute("from").flatMap(JID.init)
        let text = element.text
        reason = text.isEmpty ? nil : text
    }

    /// The delay information of a stanza, if it carries any.
    init?(in stanza: XElement) {
        guard let element = stanza.firstChild("delay", namespace: XMPPNamespace.delay) else { return nil }
        self.init(element)
    }
}

extension StanzaError {
    /// The `<error/>` element for sending (inside a stanza of the client namespace).
    public var element: XElement {
        var attributes: [XMLAttribute] = []
        attributes.append(XMLAttribute(XMLName("type"), (type ?? condition.defaultType).rawValue))
        if let by { attributes.append(XMLAttribute(XMLName("by"), by)) }
        var children: [XNode] = [
            .element(XElement(XMLName(condition.rawValue, namespace: XMPPNamespace.stanzaErrors)))
        ]
        if let text {
            children.append(
                .element(XElement(XMLName("text", namespace: XMPPNamespace.stanzaErrors), children: [.text(text)]))
            )
        }
        return XElement(.client("error"), attributes: attributes, children: children)
    }
}

extension StanzaError.Condition {
    /// The error type RFC 6120 §8.3.3 gives with each condition.
    public var defaultType: StanzaError.ErrorType {
        switch self {
        case .badRequest, .jidMalformed, .notAcceptable, .policyViolation, .redirect: .modify
        case .forbidden, .notAuthorized, .registrationRequired, .subscriptionRequired: .auth
        case .recipientUnavailable, .remoteServerTimeout, .resourceConstraint: .wait
        case .conflict, .featureNotImplemented, .gone, .internalServerError, .itemNotFound, .notAllowed,
            .remoteServerNotFound, .serviceUnavailable, .undefinedCondition, .unexpectedRequest:
            .cancel
        }
    }
}
