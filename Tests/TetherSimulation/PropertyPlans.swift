public import TetherCore

/// One step of a property test's plan: what the app, the network, the device or the server does
/// next. A plan is a list of them, run against a machine and its scripted server on the virtual
/// clock, about 100 ms apart (a `wait` lets more time pass).
public enum PlanStep: Hashable, Sendable, CustomStringConvertible {
    /// The app sends its next numbered message (XMPP) or invokes `Echo` with its next number
    /// (SignalR).
    case send
    /// Every live link is cut (both ends are told).
    case cut
    /// Every live link goes half-open: everything sent either way is lost, nobody is told.
    case stall
    /// The device loses its network (the machine is told); every live link goes half-open.
    case pathLost
    /// The network is back (the machine is told).
    case pathBack
    /// The server loses every session and refuses connections for two seconds.
    case restart
    /// The app stops the connection (and starts it again three seconds later).
    case stop
    /// This many seconds pass.
    case wait(Int)

    public var description: String {
        switch self {
        case .send: ".send"
        case .cut: ".cut"
        case .stall: ".stall"
        case .pathLost: ".pathLost"
        case .pathBack: ".pathBack"
        case .restart: ".restart"
        case .stop: ".stop"
        case .wait(let seconds): ".wait(\(seconds))"
        }
    }

    /// A random plan of `count` steps (sends weighted up, so that something is in flight when a
    /// fault strikes).
    public static func random(count: Int, using random: inout SeededRandomNumberGenerator) -> [PlanStep] {
        (0..<count).map { _ in
            switch Int.random(in: 0..<20, using: &random) {
            case 0..<8: .send
            case 8, 9: .cut
            case 10: .stall
            case 11: .pathLost
            case 12: .pathBack
            case 13: .restart
            case 14: .stop
            default: .wait(Int.random(in: 1...40, using: &random))
            }
        }
    }
}

/// What a simulation run by a plan must say at the end: what the reference model holds against.
public protocol PlannedRun {
    /// Runs `plan` and returns what broke (empty when the model held).
    func run(plan: [PlanStep]) -> [String]
}

/// Shrinks a failing plan (delta debugging): drops chunks of steps, then single steps, then
/// shortens waits, for as long as `fails` still holds. Returns the smallest plan found.
public func shrink(_ plan: [PlanStep], fails: ([PlanStep]) -> Bool) -> [PlanStep] {
    var current = plan
    var chunk = max(1, current.count / 2)
    while chunk >= 1 {
        var start = 0
        var removedAny = false
        while start < current.count {
            var candidate = current
            candidate.removeSubrange(start..<min(start + chunk, candidate.count))
            if !candidate.isEmpty && fails(candidate) {
                current = candidate
                removedAny = true
            } else {
                start += chunk
            }
        }
        if !removedAny { chunk /= 2 }
    }
    for index in current.indices {
        guard case .wait(let seconds) = current[index], seconds > 1 else { continue }
        var low = 1
        var high = seconds
        while low < high {
            let middle = (low + high) / 2
            var candidate = current
            candidate[index] = .wait(middle)
            if fails(candidate) { high = middle } else { low = middle + 1 }
        }
        current[index] = .wait(high)
    }
    return current
}

extension MachineSimulation {
    /// Runs `plan`: the machine starts, each step is applied and the clock runs on about 100 ms
    /// (a `wait` longer); then the network and the server are back, a suspended machine is told
    /// to reconnect (as the app would on its way to the foreground), everything settles, the app
    /// stops, and `checkPlanEnd` holds the run against the reference model.
    func runPlanned(_ plan: [PlanStep], settle: Duration, checkPlanEnd: () -> Void) -> [String] {
        holder.networkChanged(NetworkPath(isAvailable: true, interfaces: ["net0"]), now: now)
        holder.start(now: now)
        drain()
        schedule(after: .seconds(1), .serverTick)
        for step in plan {
            note("plan step \(step)")
            switch step {
            case .send:
                appTraffic()
                drain()
            case .cut: inject(.cut)
            case .stall: inject(.stall)
            case .restart: inject(.restart)
            case .stop:
                holder.stop(now: now)
                drain()
            case .pathLost:
                if !record.networkDown {
                    record.networkDown = true
                    for generation in links.filter({ $0.value.isOpen }).map(\.key) {
                        links[generation]!.isStalled = true
                    }
                    handle(.pathReported(false))
                }
            case .pathBack:
                if record.networkDown { handle(.pathReported(true)) }
            case .wait:
                break
            }
            let pause: Duration = if case .wait(let seconds) = step { .seconds(seconds) } else { .milliseconds(100) }
            let end = now + pause
            runSteps(until: end)
            time.advance(to: end)
        }
        if record.networkDown { handle(.pathReported(true)) }
        let serverBack = now + .seconds(10)  // a restarted server is up again by then
        runSteps(until: serverBack)
        time.advance(to: serverBack)
        if holder.phase == .suspended {
            holder.reconnectNow(now: now)
            drain()
        }
        runSteps(until: now + settle)
        isOver = true
        holder.stop(now: now)
        drain()
        runSteps(until: now + stopGrace)
        checkPlanEnd()
        return time.log.report
    }
}
