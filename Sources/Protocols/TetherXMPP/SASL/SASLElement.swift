public import TetherXML

/// The SASL negotiation elements (RFC 6120 §6.4), payloads still base64 text as on the wire.
public enum SASLElement: Hashable, Sendable {
    /// `<auth mechanism='…'>` with the initial response (`=` for an empty one).
    case auth(mechanism: String, initialResponse: String?)
    /// `<challenge>`.
    case challenge(String)
    /// `<response>`.
    case response(String)
    /// `<success>` with additional data (SCRAM's `v=`), if any.
    case success(String?)
    /// `<failure>` with its condition and text.
    case failure(condition: String, text: String?)
    /// `<abort/>`.
    case abort

    /// The view of `element`, or nil if it is not a SASL element.
    public init?(_ element: XElement) {
        guard element.namespace == XMPPNamespace.sasl else { return nil }
        let text = element.text
        switch element.localName {
        case "auth":
            guard let mechanism = element.attribute("mechanism") else { return nil }
            self = .auth(mechanism: mechanism, initialResponse: text.isEmpty ? nil : text)
        case "challenge": self = .challenge(text)
        case "response": self = .response(text)
        case "success": self = .success(text.isEmpty ? nil : text)
        case "failure":
            let condition = element.children.first { $0.localName != "text" }?.localName ?? "not-authorized"
            self = .failure(condition: condition, text: element.firstChild("text")?.text)
        case "abort": self = .abort
        default: return nil
        }
    }

    /// The element for sending.
    public var element: XElement {
        func make(_ local: String, _ attributes: [XMLAttribute] = [], _ text: String?) -> XElement {
            XElement(
                XMLName(local, namespace: XMPPNamespace.sasl),
                attributes: attributes,
                children: text.flatMap { $0.isEmpty ? nil : [.text($0)] } ?? []
            )
        }
        switch self {
        case .auth(let mechanism, let initialResponse):
            return make("auth", [XMLAttribute(XMLName("mechanism"), mechanism)], initialResponse)
        case .challenge(let data): return make("challenge", [], data)
        case .response(let data): return make("response", [], data)
        case .success(let data): return make("success", [], data)
        case .failure(let condition, let text):
            var children: [XNode] = [.element(XElement(XMLName(condition, namespace: XMPPNamespace.sasl)))]
            if let text {
                children.append(
                    .element(XElement(XMLName("text", namespace: XMPPNamespace.sasl), children: [.text(text)]))
                )
            }
            return XElement(XMLName("failure", namespace: XMPPNamespace.sasl), children: children)
        case .abort: return make("abort", [], nil)
        }
    }
}
