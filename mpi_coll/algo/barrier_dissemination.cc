/*
 * The dissemination barrier's entry over any Transport; the algorithm
 * (purpose, accepts, limits, round table) is the template in
 * barrier_dissemination.hpp.
 */
#include "algo/barrier_dissemination.hpp"

#include "algo/collectives.hpp"

namespace dualrail {
namespace coll {

dr_status_t barrier_dissemination(Transport &t, const Params &p, std::string *err)
{
    return barrier_dissemination_on(t, p, err);
}

} // namespace coll
} // namespace dualrail
