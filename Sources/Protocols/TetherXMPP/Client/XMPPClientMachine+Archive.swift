import TetherCore
import TetherXML

extension XMPPClientMachine {
    // MARK: - Catching up from the archive (XEP-0313, XEP-0359)

    /// A catch-up from the account's archive at the start of a new session, while it runs.
    struct ArchiveCatchUp: Sendable {
        /// The query's `queryid`, which the archive's results carry.
        var queryID: String
        /// The page asked for last.
        var page: ArchivePage
        /// The anchoring query's result.
        var latest: XMPPArchivePosition?
        /// The results delivered.
        var count = 0
        /// Pages asked for.
        var pages = 1
        /// The archive no longer knew the position's id: the catch-up goes by its time.
        var byTime = false
        /// The position moved since the state was last reported.
        var moved = false
        /// What the results delivered (archive ids, and sender + message id): copies that come
        /// another way (held live messages, the offline store) are not delivered twice.
        var delivered: Set<String> = []
        /// Messages that arrived meanwhile: they come after the archive's.
        var held: [XMPPMessage] = []

        /// There is no position yet: only the archive's latest id is asked for, to start one.
        var anchoring: Bool { page == .latest }
    }

    /// Which page of the archive to ask for.
    enum ArchivePage: Sendable, Equatable {
        /// The latest message alone.
        case latest
        /// The messages after this archive id.
        case after(String)
        /// The messages archived at or after this time (XEP-0082).
        case since(String)
    }

    /// A new session: catch up from the position (or start one), when configured.
    mutating func startCatchUp(_ session: Session, now: Instant) {
        caughtUpIDs = []
        guard configuration.archiveCatchUp != nil else { return }
        let page = archivePosition.map { ArchivePage.after($0.id) } ?? .latest
        var catchUp = ArchiveCatchUp(queryID: makeID("mam"), page: page)
        if let position = archivePosition { catchUp.delivered.insert("s:" + position.id) }
        self.catchUp = catchUp
        sendArchiveQuery(page, session, now: now)
    }

    mutating func sendArchiveQuery(_ page: ArchivePage, _ session: Session, now: Instant) {
        guard let catchUp, let limits = configuration.archiveCatchUp else { return }
        var fields = [XNode.formField("FORM_TYPE", XMPPNamespace.archive, hidden: true)]
        var set: [XNode] = [
            .element("max", XMPPNamespace.resultSet, [], [.text(page == .latest ? "1" : String(limits.pageSize))])
        ]
        switch page {
        case .latest: set.append(.element("before", XMPPNamespace.resultSet, [], []))
        case .after(let id): set.append(.element("after", XMPPNamespace.resultSet, [], [.text(id)]))
        case .since(let time): fields.append(.formField("start", time))
        }
        let query = XElement(
            XMLName("query", namespace: XMPPNamespace.archive),
            attributes: [XMLAttribute(XMLName("queryid"), catchUp.queryID)],
            children: [
                .element("x", XMPPNamespace.dataForms, [("type", "submit")], fields),
                .element("set", XMPPNamespace.resultSet, [], set),
            ]
        )
        let id = makeID("mamq")
        awaitIQ(id, PendingIQ(deadline: now + configuration.iqTimeout, to: nil, purpose: .archive))
        sendOwnStanza(XMPPIQ.set(query, id: id).element, session: session, now: now)
    }

    /// A message: a result of the catch-up's query, a carbon copy, or one for the app (held while
    /// the catch-up runs). Only the account itself may send results and carbons (XEP-0313 §5.1.2,
    /// XEP-0280 §11); from anyone else they are ordinary messages.
    mutating func messageReceived(_ element: XElement, _ session: Session, now: Instant) {
        // Only the account may send archive results and carbons; its JID is parsed only for a
        // message that could be one (most are not).
        func fromOwnAccount() -> Bool { element.attribute("from").map { JID($0) == session.jid.bare } ?? true }
        // `catchUp` is not bound here: a copy alive during `archiveResultReceived` would make its
        // changes copy the catch-up's set of delivered ids.
        if catchUp != nil, let result = element.firstChild("result", namespace: XMPPNamespace.archive),
            result.attribute("queryid") == catchUp?.queryID, fromOwnAccount()
        {
            return archiveResultReceived(result)
        }
        if let carbon = element.firstChild(where: {
            $0.namespace == XMPPNamespace.carbons && ($0.localName == "received" || $0.localName == "sent")
        }),
            fromOwnAccount(),
            let inner = carbon.firstChild("forwarded", namespace: XMPPNamespace.forward)?.firstChild(
                "message",
                namespace: XMPPNamespace.client
            ),
            let copy = XMPPMessage(inner, origin: .carbon(sent: carbon.localName == "sent"))
        {
            return liveMessageReceived(copy, session)
        }
        liveMessageReceived(XMPPMessage(element)!, session)
    }

    /// A message for the app: held while a catch-up runs; not delivered again when the catch-up
    /// already did; otherwise delivered, its archive id the new position.
    mutating func liveMessageReceived(_ message: XMPPMessage, _ session: Session) {
        // `catchUp` is changed in place: a copy changed and stored back would copy its held
        // messages (still shared with the stored one) at every append, quadratically.
        if catchUp?.anchoring == false, let limit = configuration.archiveCatchUp?.maximumHeldMessages {
            if catchUp!.held.count < limit {
                catchUp!.held.append(message)
            } else {
                emit(.message(message))  // beyond the limit: at once (out of order, not lost)
            }
            return
        }
        if !caughtUpIDs.isEmpty,
            Self.deliveryKeys(message, archive: session.jid.bare).contains(where: caughtUpIDs.contains)
        {
            return
        }
        emit(.message(message))
        if case .live = message.origin, let id = message.stanzaID(by: session.jid.bare) {
            archivePosition = XMPPArchivePosition(id: id)
            clientStateChanged()
        }
    }

    /// What identifies a message among copies: its archive id when it carries one (a message
    /// the account's archive stamped is the same message only with the same id, whatever its
    /// sender's `id` says: senders reuse those); a copy without one (a server that does not stamp
    /// what it stores offline) by its sender and `id`.
    static func deliveryKeys(_ message: XMPPMessage, archive: JID) -> [String] {
        if let id = message.stanzaID(by: archive) { return ["s:" + id] }
        return senderKey(message).map { [$0] } ?? []
    }

    /// The sender and the message's `id`, when it has both.
    static func senderKey(_ message: XMPPMessage) -> String? {
        guard let id = message.id, let from = message.element.attribute("from") else { return nil }
        return "m:\(from) \(id)"
    }

    mutating func archiveResultReceived(_ result: XElement) {
        guard catchUp != nil, let id = result.attribute("id"),
            let forwarded = result.firstChild("forwarded", namespace: XMPPNamespace.forward),
            let inner = forwarded.firstChild("message", namespace: XMPPNamespace.client)
        else { return }  // a result without a message: nothing to deliver
        let timestamp = forwarded.firstChild("delay", namespace: XMPPNamespace.delay)?.attribute("stamp")
        let position = XMPPArchivePosition(id: id, timestamp: timestamp)
        // Taken out while it changes and put back after: a copy left in `self.catchUp` would make
        // every insertion into `delivered` copy the whole set (quadratic over a catch-up).
        var catchUp = self.catchUp.take()!
        defer { self.catchUp = catchUp }
        if catchUp.anchoring {
            catchUp.latest = position
            return
        }
        let message = XMPPMessage(inner, origin: .archive(id: id, timestamp: timestamp))!
        // Delivered once per archive id; remembered also by sender and id, for copies that come
        // without an archive id.
        guard catchUp.delivered.insert("s:" + id).inserted else { return }
        if let key = Self.senderKey(message) { catchUp.delivered.insert(key) }
        catchUp.count += 1
        catchUp.moved = true
        archivePosition = position
        emit(.message(message))
    }

    /// The archive answered a page: the next page, or the end of the catch-up.
    mutating func archivePageAnswered(_ iq: XMPPIQ, _ session: Session, now: Instant) {
        guard var catchUp, let limits = configuration.archiveCatchUp else { return }
        if catchUp.moved {
            catchUp.moved = false
            self.catchUp = catchUp
            clientStateChanged()
        }
        guard iq.type == .result, let fin = iq.payload, fin.localName == "fin", fin.namespace == XMPPNamespace.archive
        else {
            // The archive does not know the position's id any more (XEP-0313 §4.1.2.2, `item-not-found`):
            // go by the time it was archived, when known.
            if !catchUp.anchoring, !catchUp.byTime, catchUp.count == 0, iq.error?.condition == .itemNotFound,
                let time = archivePosition?.timestamp
            {
                catchUp.byTime = true
                catchUp.page = .since(time)
                catchUp.pages += 1
                self.catchUp = catchUp
                return sendArchiveQuery(.since(time), session, now: now)
            }
            return finishCatchUp(complete: false)
        }
        if catchUp.anchoring {
            if archivePosition == nil, let latest = catchUp.latest {
                archivePosition = latest
                clientStateChanged()
            }
            self.catchUp = nil
            return
        }
        let complete = fin.attribute("complete") == "true" || fin.attribute("complete") == "1"
        let last = fin.firstChild("set", namespace: XMPPNamespace.resultSet)?.firstChild("last")?.text
        guard !complete, let last, !last.isEmpty else {
            return finishCatchUp(complete: complete || last == nil)
        }
        // A page that does not move on (the same `last` again), or more pages than the limit
        // needs, ends the catch-up: a server must not keep it going for ever.
        let pageLimit = limits.maximumMessages / limits.pageSize + 2
        guard catchUp.count < limits.maximumMessages, catchUp.page != .after(last), catchUp.pages < pageLimit else {
            return finishCatchUp(complete: false)
        }
        catchUp.page = .after(last)
        catchUp.pages += 1
        self.catchUp = catchUp
        sendArchiveQuery(.after(last), session, now: now)
    }

    /// The catch-up ended (answered, refused, timed out, or the session gone): `caughtUp`, then
    /// the messages held meanwhile (not those the archive gave). Held messages move the position
    /// only after a complete catch-up: after an incomplete one, the next starts where the archive's
    /// stopped.
    mutating func finishCatchUp(complete: Bool) {
        guard let catchUp else { return }
        let archive = (boundJID ?? configuration.jid).bare
        self.catchUp = nil
        guard !catchUp.anchoring else { return }
        caughtUpIDs = catchUp.delivered
        emit(.caughtUp(count: catchUp.count, complete: complete))
        var moved = catchUp.moved
        for message in catchUp.held {
            let keys = Self.deliveryKeys(message, archive: archive)
            if keys.contains(where: caughtUpIDs.contains) { continue }
            emit(.message(message))
            if complete, case .live = message.origin, let id = message.stanzaID(by: archive) {
                archivePosition = XMPPArchivePosition(id: id)
                moved = true
            }
        }
        if moved { clientStateChanged() }
    }
}
