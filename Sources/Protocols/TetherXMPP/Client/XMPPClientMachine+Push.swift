public import TetherCore
import TetherXML

extension XMPPClientMachine {
    // MARK: - Push notifications (XEP-0357) and carbons (XEP-0280)

    /// Registers this device for push notifications through `registration`'s app server (nil:
    /// removes the registration). Takes effect at once when online (the old registration, if
    /// different, is disabled first), else at the next session; every new session enables it
    /// again (a resumed one keeps it). `pushEnabled`, `pushDisabled` or `pushRefused` follows.
    public mutating func setPush(_ registration: XMPPPushRegistration?, now: Instant) {
        let previous = push
        push = registration
        guard case .connected(let session) = state, previous != registration else { return }
        if let previous { sendPush(previous, enable: false, session, now: now) }
        if let registration { sendPush(registration, enable: true, session, now: now) }
    }

    /// `<enable/>` (with the publish options, a secret the logs never show) or `<disable/>`.
    mutating func sendPush(_ registration: XMPPPushRegistration, enable: Bool, _ session: Session, now: Instant) {
        var children: [XNode] = []
        if enable, !registration.publishOptions.isEmpty {
            var fields = [XNode.formField("FORM_TYPE", "http://jabber.org/protocol/pubsub#publish-options")]
            for (name, value) in registration.publishOptions.sorted(by: { $0.key < $1.key }) {
                fields.append(.formField(name, value.withUnsafeText { $0 }))
            }
            children.append(
                .element(
                    XElement(
                        XMLName("x", namespace: XMPPNamespace.dataForms),
                        attributes: [XMLAttribute(XMLName("type"), "submit")],
                        children: fields
                    )
                )
            )
        }
        let payload = XElement(
            XMLName(enable ? "enable" : "disable", namespace: XMPPNamespace.push),
            attributes: [
                XMLAttribute(XMLName("jid"), registration.service.description),
                XMLAttribute(XMLName("node"), registration.node),
            ],
            children: children
        )
        let id = makeID("push")
        awaitIQ(
            id,
            PendingIQ(deadline: now + configuration.iqTimeout, to: nil, purpose: .push(registration, enable: enable))
        )
        sendOwnStanza(XMPPIQ.set(payload, id: id).element, secret: !children.isEmpty, session: session, now: now)
    }

    /// What a new session asks for besides the roster and presence: carbons (unless Bind 2 did
    /// inside the login) and push.
    mutating func startSessionServices(_ session: Session, carbonsEnabled: Bool, now: Instant) {
        if configuration.carbons, !carbonsEnabled {
            let id = makeID("carbons")
            awaitIQ(id, PendingIQ(deadline: now + configuration.iqTimeout, to: nil, purpose: .carbons))
            sendOwnStanza(
                XMPPIQ.set(XElement(XMLName("enable", namespace: XMPPNamespace.carbons)), id: id).element,
                session: session,
                now: now
            )
        }
        if let push { sendPush(push, enable: true, session, now: now) }
    }
}
