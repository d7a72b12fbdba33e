import TetherCore

/// The XMPP benchmark corpus: one client stream (header, features, stanzas, footer): 60 %
/// `<message>`, 25 % `<presence>`, 5 % roster results of 50 items, 10 % pings, with escapes and
/// non-ASCII text (`Benchmarks/README.md`, "The corpus").
struct XMPPCorpus {
    var stream: [UInt8] = []
    var stanzaCount = 0
    var counts: [String: Int] = [:]

    static let header =
        "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' from='example.com' to='bob@example.com' id='c2s-6f1c2a9e' version='1.0' xml:lang='en'><stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/><session xmlns='urn:ietf:params:xml:ns:xmpp-session'><optional/></session></stream:features>"
    static let footer = "</stream:stream>"
    static let domains = ["example.com", "example.org", "jabber.example.net", "chat.example.de"]
    static let resources = ["phone", "laptop", "desktop", "Gajim.x1y2", "Conversations.Abc1", "web-3f9a"]
    static let shows = ["away", "chat", "dnd", "xa"]
    static let statuses = [
        "In a meeting", "Back at 3 — café break", "Working from home", "🏖 vacation", "Do not disturb <deadline>",
        "Tom & Jerry's show", "Отпуск", "会議中", "",
    ]
    static let groups = ["Friends", "Work", "Family", "Ænglish club", "同事", "Coworkers & co"]
    static let chatStates = ["active", "composing", "paused", "inactive"]

    /// Generates stanzas until the stream reaches `targetBytes`.
    init(targetBytes: Int, seed: UInt64 = 20_240_602) {
        var rng = SeededRandomNumberGenerator(seed: seed)
        stream.append(contentsOf: Self.header.utf8)
        var index = 0
        while stream.count < targetBytes {
            let (kind, text) = Self.stanza(&rng, index)
            stream.append(contentsOf: text.utf8)
            counts[kind, default: 0] += 1
            index += 1
        }
        stanzaCount = index
        stream.append(contentsOf: Self.footer.utf8)
    }

    static func attribute(_ text: String) -> String {
        escape(text, apostrophe: true)
    }

    static func escaped(_ text: String) -> String {
        escape(text, apostrophe: false)
    }

    /// `&`, `<` and `>` (and `'` for single-quoted attribute values) as entity references; one
    /// pass over the bytes (chained `replacing` calls made corpus generation slow).
    static func escape(_ text: String, apostrophe: Bool) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "&"): bytes.append(contentsOf: "&amp;".utf8)
            case UInt8(ascii: "<"): bytes.append(contentsOf: "&lt;".utf8)
            case UInt8(ascii: ">") where !apostrophe: bytes.append(contentsOf: "&gt;".utf8)
            case UInt8(ascii: "'") where apostrophe: bytes.append(contentsOf: "&apos;".utf8)
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func jid(_ rng: inout SeededRandomNumberGenerator, resource: Bool = true) -> String {
        var jid = "user\(Int.random(in: 1...20_000, using: &rng))@\(domains.randomElement(using: &rng)!)"
        if resource { jid += "/" + resources.randomElement(using: &rng)! }
        return jid
    }

    static func hex(_ rng: inout SeededRandomNumberGenerator, digits: Int) -> String {
        var text = ""
        while text.count < digits {
            let chunk = String(rng.next(), radix: 16)
            text += String(repeating: "0", count: 16 - chunk.count) + chunk
        }
        return String(text.prefix(digits))
    }

    static func stanza(_ rng: inout SeededRandomNumberGenerator, _ index: Int) -> (String, String) {
        let roll = Double.random(in: 0..<1, using: &rng)
        if roll < 0.60 {
            var parts = [
                "<message from='\(attribute(jid(&rng)))' to='bob@example.com/phone' type='chat' id='m\(index)'"
            ]
            if Double.random(in: 0..<1, using: &rng) < 0.3 { parts.append(" xml:lang='en'") }
            parts.append(">")
            var state = chatStates.randomElement(using: &rng)!
            if Double.random(in: 0..<1, using: &rng) < 0.85 {
                var body = escaped(SignalRCorpus.text(&rng, 1...30))
                if Double.random(in: 0..<1, using: &rng) < 0.1 { body += " &#x1F600; &#233;" }
                parts.append("<body>\(body)</body>")
                if Double.random(in: 0..<1, using: &rng) < 0.3 {
                    parts.append("<thread>th-\(hex(&rng, digits: 8))</thread>")
                }
                if Double.random(in: 0..<1, using: &rng) < 0.2 { parts.append("<request xmlns='urn:xmpp:receipts'/>") }
                if Double.random(in: 0..<1, using: &rng) < 0.1 {
                    let day = Int.random(in: 1...28, using: &rng)
                    let minute = Int.random(in: 0...59, using: &rng)
                    parts.append(
                        "<delay xmlns='urn:xmpp:delay' from='example.com' stamp='2024-01-\(day < 10 ? "0" : "")\(day)T12:\(minute < 10 ? "0" : "")\(minute):00Z'/>"
                    )
                }
                if Double.random(in: 0..<1, using: &rng) < 0.1 {
                    parts.append(
                        "<stanza-id xmlns='urn:xmpp:sid:0' id='\(hex(&rng, digits: 32))' by='bob@example.com'/>"
                    )
                }
                state = "active"
            }
            parts.append("<\(state) xmlns='http://jabber.org/protocol/chatstates'/></message>")
            return ("message", parts.joined())
        }
        if roll < 0.85 {
            if Double.random(in: 0..<1, using: &rng) < 0.2 {
                return (
                    "presence", "<presence from='\(attribute(jid(&rng)))' to='bob@example.com' type='unavailable'/>"
                )
            }
            var parts = ["<presence from='\(attribute(jid(&rng)))' to='bob@example.com' id='p\(index)'>"]
            if Double.random(in: 0..<1, using: &rng) < 0.7 {
                parts.append("<show>\(shows.randomElement(using: &rng)!)</show>")
            }
            let status = statuses.randomElement(using: &rng)!
            if !status.isEmpty { parts.append("<status>\(escaped(status))</status>") }
            parts.append("<priority>\(Int.random(in: -1...50, using: &rng))</priority>")
            parts.append(
                "<c xmlns='http://jabber.org/protocol/caps' hash='sha-1' node='http://gajim.org' ver='q07IKJEyjvHSyhy//CH0CxmKi8w='/>"
            )
            if Double.random(in: 0..<1, using: &rng) < 0.3 {
                parts.append("<x xmlns='vcard-temp:x:update'><photo>\(hex(&rng, digits: 40))</photo></x>")
            }
            parts.append("</presence>")
            return ("presence", parts.joined())
        }
        if roll < 0.90 {
            var parts = [
                "<iq type='result' id='roster_\(index)' to='bob@example.com/phone'><query xmlns='jabber:iq:roster' ver='ver\(index)'>"
            ]
            for _ in 0..<50 {
                let name =
                    (SignalRCorpus.first.randomElement(using: &rng)! + " " + SignalRCorpus.last.randomElement(
                        using: &rng
                    )!)
                    .trimmingSpaces()
                let subscription = ["both", "both", "both", "to", "from", "none"].randomElement(using: &rng)!
                var attributes =
                    "jid='\(attribute(jid(&rng, resource: false)))' name='\(attribute(name))' subscription='\(subscription)'"
                if subscription == "none" && Bool.random(using: &rng) { attributes += " ask='subscribe'" }
                let groupRoll = Double.random(in: 0..<1, using: &rng)
                if groupRoll < 0.15 {
                    parts.append("<item \(attributes)/>")
                } else if groupRoll < 0.85 {
                    parts.append(
                        "<item \(attributes)><group>\(escaped(groups.randomElement(using: &rng)!))</group></item>"
                    )
                } else {
                    parts.append(
                        "<item \(attributes)><group>\(escaped(groups.randomElement(using: &rng)!))</group><group>\(escaped(groups.randomElement(using: &rng)!))</group></item>"
                    )
                }
            }
            parts.append("</query></iq>")
            return ("iq-roster", parts.joined())
        }
        return (
            "iq-ping",
            "<iq from='\(domains.randomElement(using: &rng)!)' to='bob@example.com/phone' id='ping-\(index)' type='get'><ping xmlns='urn:xmpp:ping'/></iq>"
        )
    }
}
