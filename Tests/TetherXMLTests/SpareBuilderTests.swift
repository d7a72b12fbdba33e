import Dispatch
import Synchronization
import Testing

@testable import TetherXML

/// Elements built in code share one spare builder (`XMLSpareBuilder`): its buffers and recent
/// name boxes carry from one element to the next, and threads that build at the same moment each
/// get a builder. What is built must not depend on what was built before or elsewhere. (Part of
/// the ThreadSanitizer run: `Tests/Sanitizers/run.sh`.)
struct SpareBuilderTests {
    /// The element `index` (on `thread`): names, prefixes, attributes and text that differ from
    /// one element to the next, some of them colliding in the recent names' slots.
    static func element(_ index: Int, thread: Int) -> (XElement, String) {
        let namespace = "urn:spare:\(index % 5)"
        let child = XElement(
            XMLName("c\(index % 7)", namespace: namespace, prefix: index % 2 == 0 ? "p" : nil),
            attributes: [XMLAttribute(XMLName("n"), "\(index)")],
            children: [.text("t\(thread)-\(index)")]
        )
        let element = XElement(
            XMLName("e\(index % 11)", namespace: namespace),
            attributes: [
                XMLAttribute(XMLName("to"), "x\(thread)@example.com"), XMLAttribute(XMLName("id"), "i\(index)"),
            ],
            namespaceDeclarations: [XMLNamespaceDeclaration(prefix: nil, uri: namespace)]
                + (index % 2 == 0 ? [XMLNamespaceDeclaration(prefix: "p", uri: namespace)] : []),
            children: [.element(child), .text("tail")]
        )
        let prefixed = index % 2 == 0
        let expected =
            "<e\(index % 11) xmlns='\(namespace)'\(prefixed ? " xmlns:p='\(namespace)'" : "")"
            + " to='x\(thread)@example.com' id='i\(index)'>"
            + "<\(prefixed ? "p:" : "")c\(index % 7) n='\(index)'>t\(thread)-\(index)</\(prefixed ? "p:" : "")c\(index % 7)>"
            + "tail</e\(index % 11)>"
        return (element, expected)
    }

    @Test func elementsBuiltOneAfterAnotherAreEachTheirOwn() {
        var built: [(XElement, String)] = []
        for index in 0..<200 { built.append(Self.element(index, thread: 0)) }
        // Checked after all were built: an element that shared a buffer or a box with a later
        // one would show the later one's names or text.
        for (element, expected) in built { #expect(element.description == expected) }
    }

    @Test func elementsBuiltOnManyThreadsAtOnce() {
        let mismatches = Atomic(0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            var built: [(XElement, String)] = []
            for index in 0..<400 { built.append(Self.element(index, thread: thread)) }
            for (element, expected) in built where element.description != expected {
                mismatches.add(1, ordering: .relaxed)
            }
        }
        #expect(mismatches.load(ordering: .relaxed) == 0)
    }

    /// A name met again with another prefix (which the serializer writes) is not the recent box.
    @Test func aNameMetAgainWithAnotherPrefixKeepsItsOwn() {
        let first = XElement(XMLName("a", namespace: "urn:x", prefix: "p"))
        let second = XElement(XMLName("a", namespace: "urn:x", prefix: "q"))
        let third = XElement(XMLName("a", namespace: "urn:x"))
        #expect(first.name.prefix == "p")
        #expect(second.name.prefix == "q")
        #expect(third.name.prefix == nil)
        #expect(first == second && second == third)  // Prefixes are presentation.
    }

    /// A large element built in code leaves no large buffers behind in the spare.
    @Test func aLargeElementsRoomIsNotKept() {
        let large = XElement(
            XMLName("big"),
            children: (0..<2_000).map { .element(XElement(XMLName("item"), children: [.text("\($0)")])) }
                + [.text(String(repeating: "x", count: 100_000))]
        )
        #expect(large.children.count == 2_000)
        _ = XElement(XMLName("small"))
        if let room = XMLSpareBuilder.spareRoom {
            #expect(room.nodes <= XMLSpareBuilder.keptRoom.nodes)
            #expect(room.textBytes <= XMLSpareBuilder.keptRoom.textBytes)
        }
    }
}
