/// Dollar budgets reuse the token ledger's arithmetic: `BudgetLedger` counts whole units in calendar windows and
/// never asks what a unit is, so a second ledger whose units are nano-dollars keeps the dollar budgets, with the same
/// reservations, roll-over and eviction rules (README, "Budgets").
extension BudgetLimits {
    /// These limits' dollar windows as the units of a `BudgetLedger` (nano-dollars).
    var nanoUSDAsUnits: BudgetLimits { BudgetLimits(tokensPerDay: nanoUSDPerDay, tokensPerMonth: nanoUSDPerMonth) }
}

extension BudgetLedger {
    /// The ledger that counts nano-dollars for `budgets` (every budget has one, so `GET /usage` reports dollars
    /// even without a dollar limit).
    package static func dollars(_ budgets: BudgetConfiguration, maxKeys: Int) -> BudgetLedger {
        BudgetLedger(perKey: budgets.perIdentity.nanoUSDAsUnits, total: budgets.total.nanoUSDAsUnits, maxKeys: maxKeys)
    }

    /// The token report of `key` with this (dollar) ledger's windows beside it.
    package func addingDollars(to windows: [BudgetReport.Window], key: String, now: Int64) -> [BudgetReport.Window] {
        let dollars = report(key: key, now: now)
        return zip(windows, dollars).map { tokens, nano in
            var w = tokens
            w.usedNanoUSD = nano.usedTokens
            w.reservedNanoUSD = nano.reservedTokens
            w.limitNanoUSD = nano.limitTokens
            return w
        }
    }
}
